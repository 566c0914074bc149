package run_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/run"
)

// The points of one run, as the real runner reports them: every figure of
// one point agrees with the others (done = confirmed + failed + skipped, the
// ratios are their counts', the rate is published over elapsed).
var (
	canaryOut = backend.RunProgress{Total: 400, Done: 25, Confirmed: 25, Published: 30, InFlight: 5, Rate: 15, Limit: 20, Stop: fakeStop,
		Canary: backend.CanarySending, CanaryItems: 40, Attempted: 25, Elapsed: 2 * time.Second}
	canaryWaiting = backend.RunProgress{Total: 400, Done: 40, Confirmed: 40, Published: 40, Rate: 4, Limit: 20, Stop: fakeStop,
		Canary: backend.CanaryWaiting, CanaryItems: 40, Checked: true, Attempted: 40, QueueDepth: 35,
		DepthQueue: "reservation-expiry", ConfirmedRun: 40, Elapsed: 10 * time.Second,
		Note: "waiting 22s for the canary's letters to come back"}
	completedRun = backend.RunProgress{Total: 400, Done: 400, Confirmed: 396, Failed: 3, Skipped: 1, Published: 399, Rate: 19.95,
		Limit: 20, Stop: fakeStop, Canary: backend.CanaryPassed, CanaryItems: 40, Checked: true, FailureRatio: 3.0 / 399, Attempted: 399,
		FailedRun: 3, QueueDepth: 0, DepthQueue: "reservation-expiry", RedeadRatio: 2.0 / 396, Redead: 2, ConfirmedRun: 396,
		Elapsed: 20 * time.Second}
	// haltedCanary is the halt of the issue: the first canary letter back
	// died again, and the run halted before anything beyond the canary
	// went out.
	haltedCanary = backend.RunProgress{Total: 400, Done: 1, Confirmed: 1, Published: 1, Rate: 0.2, Limit: 20, Stop: fakeStop,
		Canary: backend.CanaryFailed, CanaryItems: 40, Checked: true, Attempted: 1, QueueDepth: 0,
		DepthQueue: "reservation-expiry", RedeadRatio: 1, Redead: 1, ConfirmedRun: 1, Halted: replay.ConditionRedeadRatio,
		Elapsed: 5 * time.Second}
)

// TestGoldenThroughARun draws the run screen at every point of a run, a
// halt and an operator's stop included, from golden files.
func TestGoldenThroughARun(t *testing.T) {
	t.Parallel()
	for _, point := range []struct {
		name   string
		w, h   int
		runner *tuitest.Runner
		// until is what the screen shows once it drew the point.
		until string
		// stop asks the run to stop once it drew until.
		stop bool
	}{
		{name: "starting", w: 80, h: 24, runner: &tuitest.Runner{Hold: make(chan struct{})}, until: "not sent yet"},
		{name: "canary_out", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{canaryOut}, Hold: make(chan struct{})},
			until: "going out"},
		{name: "canary_waiting", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{canaryOut, canaryWaiting}, Hold: make(chan struct{})},
			until: "waiting 22s"},
		{name: "halfway", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{canaryOut, canaryWaiting, halfway}, Hold: make(chan struct{})},
			until: "200/400"},
		{name: "completed", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{canaryWaiting, halfway},
			Summary: backend.RunSummary{Status: replay.StatusCompleted, Final: completedRun}}, until: "completed: 396 confirmed"},
		{name: "halted", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{{Total: 400, Canary: backend.CanarySending, CanaryItems: 1}},
			Summary: backend.RunSummary{Status: replay.StatusHalted, Final: haltedCanary,
				HaltReason: "redead-ratio: 1 of 1 replayed letters died again (ratio 1.000, above the stop condition 0.2)"}},
			until: "again"},
		{name: "halted_120x40", w: 120, h: 40, runner: &tuitest.Runner{Summary: backend.RunSummary{Status: replay.StatusHalted, Final: haltedCanary,
			HaltReason: "redead-ratio: 1 of 1 replayed letters died again (ratio 1.000, above the stop condition 0.2)"}},
			until: "again"},
		{name: "stopped", w: 80, h: 24, runner: &tuitest.Runner{Steps: []backend.RunProgress{halfway}, Hold: make(chan struct{}),
			Stopped: backend.RunSummary{Final: stoppedAt(halfway)}}, until: "200/400", stop: true},
	} {
		t.Run(point.name, func(t *testing.T) {
			t.Parallel()
			m, cmd := run.New(tuitest.Context(point.w, point.h), services(point.runner)).Start(2)
			tm := teatest.NewTestModel(t, tuitest.Wrap(stopper{m}, cmd), teatest.WithInitialTermSize(point.w, point.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(point.until)) },
				teatest.WithDuration(5*time.Second))
			if point.stop {
				tm.Send(stopMsg{})
				teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("resumes it")) },
					teatest.WithDuration(5*time.Second))
			}
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t).(stoppable)
			final.M.Stop()
			view := final.View()
			tuitest.AssertFits(t, view, point.w, point.h)
			golden.RequireEqual(t, []byte(view))
			assertAgrees(t, view)
		})
	}
}

// stoppedAt is p as the runner reports it once stopped: nothing in flight,
// the canary as it stood.
func stoppedAt(p backend.RunProgress) backend.RunProgress {
	p.InFlight, p.Note = 0, ""
	return p
}

// assertAgrees checks what must hold on any run screen, beyond the golden
// file: a halt's row is the condition the halt names, and no figure the
// runner had not read is drawn as a number.
func assertAgrees(t *testing.T, view string) {
	t.Helper()
	if strings.Contains(view, "halted: redead-ratio") {
		for _, l := range strings.Split(view, "\n") {
			if strings.Contains(l, "<- halted") && !strings.Contains(l, "re-dead-lettered") {
				t.Errorf("the halt names redead-ratio but marks %q", l)
			}
			if strings.Contains(l, "re-dead-lettered") && !strings.Contains(l, "100.0% (1 of 1)") {
				t.Errorf("the halt says 1 of 1 died again, the row says %q", l)
			}
			if strings.Contains(l, "canary") && !strings.Contains(l, "failed") {
				t.Errorf("the canary halted the run, the line says %q", l)
			}
		}
	}
}

// stopMsg asks the harness's run to stop, as the root does when the
// operator chooses to stop it before quitting.
type stopMsg struct{}

// stoppable is the harness with a stop message.
type stoppable = tuitest.Harness[stopper]

// stopper is the run screen that stops its run on stopMsg.
type stopper struct{ run.Model }

func (s stopper) Update(msg tea.Msg) (stopper, tea.Cmd) {
	if _, ok := msg.(stopMsg); ok {
		return stopper{s.StopRun()}, nil
	}
	m, cmd := s.Model.Update(msg)
	return stopper{m}, cmd
}

func (s stopper) SetFrame(ctx frame.Context) stopper { return stopper{s.Model.SetFrame(ctx)} }
