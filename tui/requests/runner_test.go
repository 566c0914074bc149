package requests_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/requests"
)

// runnersFixture has request 8 running with no runner (interrupted), 9
// running under its runner, and 1 pending.
func runnersFixture() *fakes.Requests {
	running := func(id int64, runner string) replay.Request {
		r := fakes.Request(id, "alice", 100)
		r.Status, r.ReviewedBy = replay.StatusRunning, "bob"
		held := runner != ""
		r.RunnerHeld, r.Runner = &held, runner
		return r
	}
	return fakes.NewRequests("bob", fakes.Request(1, "alice", 5), running(8, ""),
		running(9, `"expiryctl replay run by carol@host-1" (PostgreSQL backend 4242 of login carol)`))
}

// The requests screen says which running request no runner holds, in its
// row and below the list with how to resume it; g resumes it; opened, it
// says so as `replay show` does. A running request with its runner is
// neither marked nor resumable.
func TestRunnerGone(t *testing.T) {
	t.Parallel()
	m, first := requests.New(tuitest.Context(100, 20), tuitest.Services(fakes.Letters(5), runnersFixture())).Refresh()
	m, _ = tuitest.Drive(t, m, update, first)
	view := m.View()
	tuitest.AssertSafe(t, view)
	rows := map[string]string{}
	for _, l := range strings.Split(view, "\n") {
		if f := strings.Fields(strings.TrimLeft(l, "> ")); len(f) > 2 {
			rows[f[0]] = l
		}
	}
	if !strings.Contains(rows["9"], " running ") || !strings.Contains(rows["8"], " no runner ") {
		t.Errorf("rows 8 and 9:\n%s", view)
	}
	if !strings.Contains(view, "request 8 has no runner: g or `expiryctl replay run 8` resumes it") {
		t.Errorf("the list does not say how to resume request 8:\n%s", view)
	}

	// The list is newest first: 9, 8, 1.
	m, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("g"))
	if n, ok := last(msgs).(frame.NoticeMsg); !ok || !strings.Contains(n.Text, "replay request 9 is running") {
		t.Errorf("g on a request its runner holds: %#v, want a notice", last(msgs))
	}
	m, msgs = tuitest.Drive(t, m, update, nil, tuitest.Key("down"), tuitest.Key("g"))
	if r, ok := last(msgs).(frame.RunRequestMsg); !ok || r.ID != 8 {
		t.Errorf("g on request 8: %#v, want RunRequestMsg{8}", last(msgs))
	}
	m, _ = tuitest.Drive(t, m, update, nil, tuitest.Key("enter"))
	opened := m.View()
	for _, want := range []string{"Replay request 8 — replay running (no runner)", "none: no process runs this request",
		"expiryctl replay run 8"} {
		if !strings.Contains(opened, want) {
			t.Errorf("opened request 8 lacks %q:\n%s", want, opened)
		}
	}
}

func TestRunnerGoneGolden(t *testing.T) {
	t.Parallel()
	m, first := requests.New(tuitest.Context(80, 12), tuitest.Services(fakes.Letters(5), runnersFixture())).Refresh()
	tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(80, 12))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("3 requests")) },
		teatest.WithDuration(5*time.Second))
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	view := tm.FinalModel(t).View()
	tuitest.AssertSafe(t, view)
	tuitest.AssertFits(t, view, 80, 12)
	golden.RequireEqual(t, []byte(view))
}
