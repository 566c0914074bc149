package commands

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/replay"
)

// The run's progress, on a terminal and in the terminal UI, shows the rate
// the run allows itself and why.
func TestRunProgressShowsThePace(t *testing.T) {
	t.Parallel()
	p := replay.Progress{RequestID: 7, Kind: replay.KindReplay, Phase: "replay", Total: 300, Done: 40, Confirmed: 40, Rate: 9.5,
		Pace: 10, PaceWhy: "lowered to 10.0/s: reservation-expiry ready 120 → 340, growing"}
	want := "replay 7: 40/300 done (40 confirmed, 0 skipped, 0 failed), 0 in flight, 9.5/s · lowered to 10.0/s: reservation-expiry ready 120 → 340, growing"
	if got := runProgressLine(p); got != want {
		t.Fatalf("progress %q, want %q", got, want)
	}

	p.PaceWhy = "fixed ceiling 20/s: no live view to pace by\x1b[31m"
	if got := runProgressLine(p); strings.Contains(got, "\x1b[31m") || !strings.Contains(got, "· fixed ceiling 20/s: no live view to pace by") {
		t.Fatalf("progress %q: the reason is shown, escaped", got)
	}

	req := replay.Request{ID: 7, Rate: 20}
	if got := tuiProgress(p, req); !strings.HasPrefix(got.Note, "pace: fixed ceiling 20/s") || got.Limit != 20 {
		t.Fatalf("tui progress %+v", got)
	}
	p.Phase, p.CanaryLeft = "canary-wait", 3e9
	if got := tuiProgress(p, req); !strings.HasPrefix(got.Note, "waiting 3s for the canary") {
		t.Fatalf("the canary's wait comes first: %q", got.Note)
	}
}
