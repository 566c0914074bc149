package requests_test

import (
	"bytes"
	"errors"
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
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/requests"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m requests.Model, msg tea.Msg) (requests.Model, tea.Cmd) { return m.Update(msg) }

func fixture(actor string) *fakes.Requests {
	approved := fakes.Request(2, "carol", 3)
	approved.Status, approved.ReviewedBy = replay.StatusApproved, "bob"
	done := fakes.Request(3, "alice", 3)
	done.Status = replay.StatusCompleted
	fresh := fakes.Request(4, "alice", 40)
	fresh.FreshKey, fresh.Why = true, "INC-9 \x1b[2Jcleared"
	return fakes.NewRequests(actor, fakes.Request(1, "alice", 5), approved, done, fresh)
}

func setup(t *testing.T, actor string, keys ...string) (requests.Model, []tea.Msg) {
	t.Helper()
	reqs := fixture(actor)
	m, first := requests.New(tuitest.Context(80, 21), tuitest.Services(fakes.Letters(5), reqs)).Refresh()
	m, _ = tuitest.Drive(t, m, update, first)
	var all []tea.Msg
	for _, k := range keys {
		var msgs []tea.Msg
		m, msgs = tuitest.Drive(t, m, update, nil, tuitest.Key(k))
		all = append(all, msgs...)
	}
	return m, all
}

func last(msgs []tea.Msg) tea.Msg {
	if len(msgs) == 0 {
		return nil
	}
	return msgs[len(msgs)-1]
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		keys  []string
		check func(t *testing.T, m requests.Model, msg tea.Msg)
	}{
		{name: "approve opens a form for the selected request", keys: []string{"a"}, check: func(t *testing.T, _ requests.Model, msg tea.Msg) {
			o, ok := msg.(form.OpenMsg)
			if !ok || o.Spec.Title != "Approve replay request 4" || len(o.Spec.Fields) != 2 {
				t.Errorf("got %#v, want the approve form of 4 with the fresh-key field", msg)
			}
		}},
		{name: "reject needs why", keys: []string{"down", "x"}, check: func(t *testing.T, _ requests.Model, msg tea.Msg) {
			o, ok := msg.(form.OpenMsg)
			if !ok || o.Spec.Title != "Reject replay request 2" || !o.Spec.Fields[0].Required {
				t.Errorf("got %#v, want the reject form of 2 with a required why", msg)
			}
		}},
		{name: "cancel", keys: []string{"c"}, check: func(t *testing.T, _ requests.Model, msg tea.Msg) {
			if o, ok := msg.(form.OpenMsg); !ok || !strings.HasPrefix(o.Spec.Title, "Cancel replay request 4") {
				t.Errorf("got %#v", msg)
			}
		}},
		{name: "run an approved request", keys: []string{"down", "g"}, check: func(t *testing.T, _ requests.Model, msg tea.Msg) {
			if r, ok := msg.(frame.RunRequestMsg); !ok || r.ID != 2 {
				t.Errorf("got %#v, want RunRequestMsg{2}", msg)
			}
		}},
		{name: "run a pending request is refused with why", keys: []string{"g"}, check: func(t *testing.T, _ requests.Model, msg tea.Msg) {
			if n, ok := msg.(frame.NoticeMsg); !ok || !strings.Contains(n.Text, "only an approved request runs") {
				t.Errorf("got %#v", msg)
			}
		}},
		{name: "enter shows the request", keys: []string{"enter"}, check: func(t *testing.T, m requests.Model, _ tea.Msg) {
			if m.Opened() != 4 || !strings.Contains(m.View(), "FRESH") || !strings.Contains(m.View(), "cohort") {
				t.Errorf("opened %d:\n%s", m.Opened(), m.View())
			}
		}},
		{name: "esc closes the request", keys: []string{"enter", "esc"}, check: func(t *testing.T, m requests.Model, _ tea.Msg) {
			if m.Opened() != 0 {
				t.Errorf("opened %d, want the list", m.Opened())
			}
		}},
		{name: "scope cycles to pending", keys: []string{"s"}, check: func(t *testing.T, m requests.Model, _ tea.Msg) {
			if m.Scope() != requests.ScopePending || strings.Contains(m.View(), "approved") {
				t.Errorf("scope %s:\n%s", m.Scope(), m.View())
			}
		}},
		{name: "scope all shows closed ones", keys: []string{"s", "s"}, check: func(t *testing.T, m requests.Model, _ tea.Msg) {
			if !strings.Contains(m.View(), "completed") {
				t.Errorf("view:\n%s", m.View())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, msgs := setup(t, "bob", tt.keys...)
			tuitest.AssertSafe(t, m.View())
			tt.check(t, m, last(msgs))
		})
	}
}

func TestApproveRefusedByFourEyes(t *testing.T) {
	t.Parallel()
	reqs := fixture("alice")
	svc := tuitest.Services(fakes.Letters(5), reqs)
	msg := action.ReviewSpec(svc, fakes.Request(1, "alice", 5), true).Submit(form.Values{"why": "ok"})()
	done := msg.(action.DoneMsg)
	var refusal *replay.Refusal
	if done.Err == nil || !asRefusal(done.Err, &refusal) || refusal.Rule != "four-eyes" {
		t.Fatalf("approve own request: %v, want a four-eyes refusal", done.Err)
	}
}

func asRefusal(err error, target **replay.Refusal) bool {
	return errors.As(err, target)
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w, h int
		keys []string
		wait string
	}{
		{"80x24", 80, 24, nil, "3 requests"},
		{"120x40", 120, 40, nil, "3 requests"},
		{"opened_80x24", 80, 24, []string{"enter"}, "consumed now by"}, // the cohort is below the fold
		{"opened_120x40", 120, 40, []string{"enter"}, "Cohort (20 of 40)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, first := requests.New(tuitest.Context(tc.w, tc.h), tuitest.Services(fakes.Letters(5), fixture("bob"))).Refresh()
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(tc.w, tc.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("3 requests")) },
				teatest.WithDuration(5*time.Second))
			for _, k := range tc.keys {
				tm.Send(tuitest.Key(k))
			}
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.wait)) || tc.keys == nil },
				teatest.WithDuration(5*time.Second))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			view := tm.FinalModel(t).View()
			tuitest.AssertSafe(t, view)
			tuitest.AssertFits(t, view, tc.w, tc.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}
