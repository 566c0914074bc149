package letterview

import (
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

func TestRenderTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	var d deadletter.Detail
	d.DeadLetteredAt, d.IngestedAt = at, at
	d.AttemptHistory = []deadletter.AttemptEvent{
		{At: at, Source: "worker", ErrorClass: "ETIMEDOUT", Error: "connect ETIMEDOUT"},
		{Source: "worker", ErrorClass: "ECONNREFUSED", Error: "no time given"},
	}
	d.Deaths = []deadletter.Death{{Count: 1, Reason: "rejected", Queue: "q"}}
	out := Render(d, Styles{}, Options{Now: at})

	tests := []struct{ name, want string }{
		{"a known time", "  2026-11-30T12:20:00Z  worker  ETIMEDOUT  connect ETIMEDOUT\n"},
		{"an unknown time, aligned with the known ones", "  unknown               worker  ECONNREFUSED  no time given\n"},
		{"an x-death entry without a time", "routing-keys=[] time=unknown\n"},
	}
	for _, tt := range tests {
		if !strings.Contains(out, tt.want) {
			t.Errorf("%s: want %q in\n%s", tt.name, tt.want, out)
		}
	}
	if strings.Contains(out, "0001-01-01") {
		t.Errorf("the zero time is shown:\n%s", out)
	}
}
