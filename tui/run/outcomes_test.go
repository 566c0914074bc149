package run_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/run"
)

// TestRunShowsOutcomes: with an outcome query watching, the run view shows
// the terminal-state latency, the conflicts and the unsettled items live,
// within an 80x24 screen.
func TestRunShowsOutcomes(t *testing.T) {
	t.Parallel()
	watched := halfway
	watched.Outcomes = &replay.OutcomeStats{Watched: 196, Terminal: 190, Waiting: 4, Unsettled: 2, Conflicts: 3,
		LatencyP50: 80 * time.Millisecond, LatencyP99: 2100 * time.Millisecond}
	r := &tuitest.Runner{Steps: []backend.RunProgress{watched}, Hold: make(chan struct{})}
	m, cmd := run.New(tuitest.Context(80, 24), services(r)).Start(2)
	tm := teatest.NewTestModel(t, tuitest.Wrap(m, cmd), teatest.WithInitialTermSize(80, 24))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("conflicts")) },
		teatest.WithDuration(5*time.Second))
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t).(tuitest.Harness[run.Model])
	final.M.Stop()
	view := final.View()
	tuitest.AssertFits(t, view, 80, 24)
	if want := "outcomes 190/196 terminal, p50 80ms p99 2.1s, 3 conflicts, 2 unsettled"; !strings.Contains(view, want) {
		t.Errorf("the run view lacks %q:\n%s", want, view)
	}
}
