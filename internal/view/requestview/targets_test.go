package requestview

import (
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
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

	inPlace := replay.Detail{RetriesInPlace: true, Request: replay.Request{Kind: replay.KindReplay,
		Targets: []replay.Target{{RoutingKey: "bullmq://127.0.0.1:6379/0/bull/reservation-expiry", Letters: 4, System: deadletter.System("bullmq")}}}}
	view = Render(inPlace, Styles{}, "")
	if want := "nothing: each failed job is retried where it is"; !strings.Contains(view, want) || strings.Contains(view, "exchange") {
		t.Errorf("BullMQ request: want %q and no exchange in\n%s", want, view)
	}

	const arn = "arn:aws:sqs:us-east-1:000000000000:reservation-expiry"
	copies := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, ToRoutingKey: arn,
		Targets: []replay.Target{{RoutingKey: arn, Letters: 3, System: deadletter.System("sqs")}}}}
	view = Render(copies, Styles{}, "")
	for _, want := range []string{"the queue each letter came from (or the one the request names): no other queue gets a copy",
		`queue "` + arn + `": 3 letters`, `fallback target      queue "` + arn + `" (for letters that name no queue)`} {
		if !strings.Contains(view, want) || strings.Contains(view, "exchange") {
			t.Errorf("a request of a system without exchanges: want %q and no exchange in\n%s", want, view)
		}
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

// TestTimeLines: the approver reads when the letters may go.
func TestTimeLines(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	d := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, NotBefore: at("2026-12-05T06:00:00Z")},
		Timing: &replay.Timing{PastDue: 38, NotYetDue: 2, DueFrom: at("2026-12-05T02:10:00Z"), DueTo: at("2026-12-05T07:00:00Z"),
			RetryAfter: 1, RetryAfterUntil: at("2026-12-05T06:30:00Z"), Held: 40, HeldUntil: at("2026-12-05T07:00:00Z")}}
	view := Render(d, Styles{}, "")
	for _, want := range []string{
		"not before           2026-12-05T06:00:00Z (--not-before): the run publishes nothing before it",
		"due                  38 past due, 2 not yet due (deadlines 2026-12-05T02:10:00Z to 2026-12-05T07:00:00Z)",
		"2 letters not yet due wait for their deadline",
		"retry-after          1 letter asked to be left alone until as late as 2026-12-05T06:30:00Z",
		"held back            40 items wait now, the last until 2026-12-05T07:00:00Z",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("no %q in\n%s", want, view)
		}
	}
	d.IncludeNotDue = true
	if view := Render(d, Styles{}, ""); !strings.Contains(view, "INCLUDED (--include-not-due): 2 letters not yet due go out without waiting") {
		t.Errorf("--include-not-due not shown:\n%s", view)
	}
}

// TestFateLines: after a run, the approver and the on-call engineer read
// how many of the confirmed jobs died again, how many settled and how many
// nobody knows about; before a run, whether it will see them come back.
func TestFateLines(t *testing.T) {
	t.Parallel()
	d := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, Status: replay.StatusHalted,
		Fates: &replay.Fates{Confirmed: 40, CameBack: 38, Settled: 0, Unknown: 2}}, States: map[string]int{"confirmed": 40}}
	view := Render(d, Styles{}, "")
	for _, want := range []string{
		"came back            38 of the 40 confirmed died again and were captured",
		"settled              0 reached their terminal state",
		"unknown              2 neither: nothing saw them reach their terminal state (the policy sets no outcome query)",
		"dead letters back    captured by the run",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("no %q in\n%s", want, view)
		}
	}
	d.Fates, d.States = nil, map[string]int{"pending": 40}
	d.UnwatchedWhy = "the other site captures it"
	view = Render(d, Styles{}, "")
	if strings.Contains(view, "came back") {
		t.Errorf("a came-back line before anything was confirmed:\n%s", view)
	}
	if !strings.Contains(view, "UNWATCHED (--unwatched): the other site captures it") {
		t.Errorf("the --unwatched reason is not shown:\n%s", view)
	}
}

// TestHandlerCheckNamesQueuesWithoutANewConsumer: the check passes on one
// new consumer among the target queues; the line must not then say every
// queue has one while the list above it shows a queue with none.
func TestHandlerCheckNamesQueuesWithoutANewConsumer(t *testing.T) {
	t.Parallel()
	d := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, ViaExchange: true,
		FailedUnder: []replay.VersionCount{{Version: "v1", Letters: 3}},
		Targets:     []replay.Target{{Exchange: "reservations", RoutingKey: "reservation.expire", Letters: 3}}},
		Handler: &replay.HandlerCheck{ConsumedNow: &replay.Observation{Queues: []replay.QueueConsumers{
			{Queue: "reservation-expiry", Consumers: []replay.Consumer{{HandlerVersion: "v2"}}},
			{Queue: "billing"},
			{Queue: "audit-tap", Consumers: []replay.Consumer{{HandlerVersion: "v1"}}}}}}}
	view := Render(d, Styles{}, "")
	if strings.Contains(view, "every target queue has a consumer") {
		t.Errorf("the check says every queue has a consumer, though billing has none:\n%s", view)
	}
	for _, want := range []string{"queue billing has no consumer", "queue audit-tap has only consumers on a version the cohort failed under"} {
		if !strings.Contains(view, want) {
			t.Errorf("no %q in\n%s", want, view)
		}
	}
	d.Handler.ConsumedNow.Queues = d.Handler.ConsumedNow.Queues[:1]
	if view := Render(d, Styles{}, ""); !strings.Contains(view, "passes: every target queue has a consumer on a version the cohort did not fail under") {
		t.Errorf("one queue with a new consumer:\n%s", view)
	}
}

// TestCanaryLine: the approver reads what goes first, and that a canary of
// the whole cohort holds nothing back.
func TestCanaryLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		canary, items int
		want          string
	}{
		{5, 50, "5 letters first, then wait up to 30s for them to come back"},
		{1, 1, "the whole cohort, so none apart: after the last publish, wait up to 30s for letters to come back"},
		{0, 3, "none: after the last publish, wait up to 30s for letters to come back"},
	} {
		d := replay.Detail{Request: replay.Request{Kind: replay.KindReplay, Canary: tc.canary, Items: tc.items,
			Stop: replay.StopConditions{CanaryWindow: 30 * time.Second}}}
		view := Render(d, Styles{}, "")
		if !strings.Contains(view, "canary               "+tc.want) {
			t.Errorf("canary %d of %d: no %q in\n%s", tc.canary, tc.items, tc.want, view)
		}
		if tc.items == 1 && !strings.Contains(view, "cohort               1 letter,") {
			t.Errorf("a cohort of one is not \"1 letter\" in\n%s", view)
		}
	}
}
