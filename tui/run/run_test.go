package run_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/run"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m run.Model, msg tea.Msg) (run.Model, tea.Cmd) { return m.Update(msg) }

func services(r backend.Runner) backend.Services {
	approved := fakes.Request(2, "alice", 400)
	approved.Status, approved.Canary = replay.StatusApproved, 40
	svc := tuitest.Services(fakes.Letters(5), fakes.NewRequests("bob", approved))
	svc.Runner = r
	return svc
}

// fakeStop are the fake request's stop conditions, which the runner's
// progress carries.
var fakeStop = fakes.Request(2, "alice", 400).Stop

// halfway is a run half done: its counts agree with each other (done is
// confirmed + failed + skipped; the ratios are their counts' ratios; the rate
// is published over elapsed), as the real runner's do.
var halfway = backend.RunProgress{Total: 400, Done: 200, Confirmed: 196, Failed: 3, Skipped: 1, Published: 203, InFlight: 4,
	Rate: 20.3, Limit: 20, Stop: fakeStop, Canary: backend.CanaryPassed, CanaryItems: 40, Checked: true,
	FailureRatio: 3.0 / 199, Attempted: 199, FailedRun: 3, QueueDepth: 120, DepthQueue: "reservation-expiry",
	RedeadRatio: 2.0 / 196, Redead: 2, ConfirmedRun: 196, Elapsed: 10 * time.Second, Note: "pace: consumers keep up"}

func TestRunToCompletion(t *testing.T) {
	t.Parallel()
	final := halfway
	final.Done, final.Confirmed, final.Skipped, final.InFlight = 400, 396, 1, 0
	r := &tuitest.Runner{Steps: []backend.RunProgress{{Total: 400, Canary: backend.CanarySending}, halfway},
		Summary: backend.RunSummary{Status: replay.StatusCompleted, Final: final}}
	m, cmd := run.New(tuitest.Context(80, 21), services(r)).Start(2)
	m, msgs := tuitest.Drive(t, m, update, cmd)
	if m.Running() {
		t.Fatal("still running after the runner returned")
	}
	var notice string
	for _, msg := range msgs {
		if n, ok := msg.(frame.NoticeMsg); ok {
			notice = n.Text
		}
	}
	if notice != "replay request 2 completed: 396 confirmed, 3 failed, 1 skipped" {
		t.Errorf("notice %q", notice)
	}
	if v := m.View(); !strings.Contains(v, "400/400 settled (100%)") || !strings.Contains(v, "completed") {
		t.Errorf("view:\n%s", v)
	}
}

func TestHaltedAndCancel(t *testing.T) {
	t.Parallel()
	r := &tuitest.Runner{Steps: []backend.RunProgress{halfway},
		Summary: backend.RunSummary{Status: replay.StatusHalted, HaltReason: "publish failure ratio 6% above 5%", Final: halfway}}
	m, cmd := run.New(tuitest.Context(80, 21), services(r)).Start(2)
	m, _ = tuitest.Drive(t, m, update, cmd)
	if v := m.View(); !strings.Contains(v, "halted: publish failure ratio 6% above 5%") || !strings.Contains(v, "fresh approval") {
		t.Errorf("view:\n%s", v)
	}
	_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("c"))
	if o, ok := msgs[len(msgs)-1].(form.OpenMsg); !ok || !strings.HasPrefix(o.Spec.Title, "Cancel replay request 2") {
		t.Errorf("c gave %#v, want the cancel form", msgs[len(msgs)-1])
	}
}

func TestStopCancelsTheRun(t *testing.T) {
	t.Parallel()
	r := &tuitest.Runner{Steps: []backend.RunProgress{halfway}, Hold: make(chan struct{}), Stopped: backend.RunSummary{Final: halfway}}
	m, cmd := run.New(tuitest.Context(80, 21), services(r)).Start(2)
	m = m.StopRun()
	m, _ = tuitest.Drive(t, m, update, cmd)
	if v := m.View(); m.Running() || !strings.Contains(v, "stopped, resumable") || !strings.Contains(v, "`expiryctl replay run 2` resumes it") {
		t.Errorf("after StopRun:\n%s", v)
	}
}

func TestNoRunner(t *testing.T) {
	t.Parallel()
	m, cmd := run.New(tuitest.Context(80, 21), services(nil)).Start(2)
	m, _ = tuitest.Drive(t, m, update, cmd)
	if v := m.View(); !strings.Contains(v, "expiryctl replay run 2") {
		t.Errorf("view:\n%s", v)
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"120x40", 120, 40}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			r := &tuitest.Runner{Steps: []backend.RunProgress{halfway}, Hold: make(chan struct{})}
			m, cmd := run.New(tuitest.Context(size.w, size.h), services(r)).Start(2)
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, cmd), teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("200/400")) && bytes.Contains(b, []byte("10000")) },
				teatest.WithDuration(5*time.Second))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t).(tuitest.Harness[run.Model])
			final.M.Stop()
			view := final.View()
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}

// TestCancelKeyAsTheRunStands: the help line offers cancel only where the
// database would take it, and says what it does for a halted request.
func TestCancelKeyAsTheRunStands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status replay.Status
		stop   bool
		want   string
	}{
		{name: "completed", status: replay.StatusCompleted},
		{name: "cancelled", status: replay.StatusCancelled},
		{name: "halted", status: replay.StatusHalted, want: "cancel request (frees its letters)"},
		{name: "stopped, resumable", stop: true, want: "cancel request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &tuitest.Runner{Steps: []backend.RunProgress{halfway},
				Summary: backend.RunSummary{Status: tc.status, Final: halfway}}
			if tc.stop {
				r.Hold, r.Stopped = make(chan struct{}), backend.RunSummary{Final: halfway}
			}
			m, cmd := run.New(tuitest.Context(80, 21), services(r)).Start(2)
			if tc.stop {
				m = m.StopRun()
			}
			m, _ = tuitest.Drive(t, m, update, cmd)
			c := m.Keys().Cancel
			got := ""
			if c.Enabled() {
				got = c.Help().Desc
			}
			if got != tc.want {
				t.Errorf("cancel offered as %q, want %q", got, tc.want)
			}
			_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("c"))
			opened := false
			for _, msg := range msgs {
				if _, ok := msg.(form.OpenMsg); ok {
					opened = true
				}
			}
			if opened != (tc.want != "") {
				t.Errorf("c opened the cancel form: %v, want %v", opened, tc.want != "")
			}
		})
	}
}

func TestNoCancelWithoutARun(t *testing.T) {
	t.Parallel()
	if run.New(tuitest.Context(80, 21), services(nil)).Keys().Cancel.Enabled() {
		t.Error("cancel offered with no request on the screen")
	}
}
