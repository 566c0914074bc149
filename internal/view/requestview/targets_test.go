package requestview

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/replay"
)

// TestTargetLines: the approver reads where the letters go, and, for a
// request through the original exchange, every queue that gets a copy.
func TestTargetLines(t *testing.T) {
	t.Parallel()
	home := replay.Detail{Request: replay.Request{Kind: replay.KindReplay,
		Targets: []replay.Target{{RoutingKey: "reservation-expiry", Letters: 40}}}}
	view := Render(home, Styles{}, "")
	for _, want := range []string{"the queue each letter failed in, through the default exchange: no other queue gets a copy",
		"queue reservation-expiry (default exchange): 40 letters"} {
		if !strings.Contains(view, want) {
			t.Errorf("default request: no %q in\n%s", want, view)
		}
	}
	if strings.Contains(view, "copies to") {
		t.Errorf("default request lists copies:\n%s", view)
	}

	via := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, ViaExchange: true,
		Targets: []replay.Target{{Exchange: "reservations", RoutingKey: "reservation.expire", Letters: 40}}},
		Handler: &replay.HandlerCheck{ConsumedNow: &replay.Observation{Queues: []replay.QueueConsumers{
			{Queue: "reservation-expiry"}, {Queue: "billing\x1b[2J"}}}}}
	view = Render(via, Styles{}, "")
	for _, want := range []string{"THROUGH THE ORIGINAL EXCHANGE (--via-exchange)",
		"exchange reservations key reservation.expire: 40 letters",
		`copies to            2 queues, one copy each: reservation-expiry, billing\x1b[2J`} {
		if !strings.Contains(view, want) {
			t.Errorf("via-exchange request: no %q in\n%s", want, view)
		}
	}
}
