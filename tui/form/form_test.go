package form_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

type submitted struct{ v form.Values }

func spec() form.Spec {
	return form.Spec{
		Title: "Request a replay of 2 marked letters",
		Lines: []string{"A different approver must approve it."},
		Fields: []form.Field{
			{Key: "rate", Label: "rate", Hint: "replays per second", Validate: func(s string) error {
				if s != "5" {
					return errors.New("want 5")
				}
				return nil
			}},
			{Key: "why", Label: "why", Required: true},
		},
		Submit: func(v form.Values) tea.Cmd { return func() tea.Msg { return submitted{v} } },
	}
}

func update(m form.Model, msg tea.Msg) (form.Model, tea.Cmd) { return m.Update(msg) }

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		keys        []tea.Msg
		wantFocus   string
		wantErr     string
		wantValues  form.Values
		wantClosed  bool
		wantSubmits bool
	}{
		{name: "starts on the first field", wantFocus: "rate"},
		{name: "tab moves on", keys: tuitest.Keys("tab"), wantFocus: "why"},
		{name: "shift+tab wraps back", keys: tuitest.Keys("shift+tab"), wantFocus: "why"},
		{name: "enter on a field moves on", keys: tuitest.Keys("enter"), wantFocus: "why"},
		{name: "required field refused", keys: tuitest.Keys("enter", "enter"), wantFocus: "why", wantErr: "why is required"},
		{name: "invalid value refused", keys: join(tuitest.Type("7"), tuitest.Keys("tab"), tuitest.Type("INC-1"), tuitest.Keys("enter")), wantFocus: "rate", wantErr: "rate: want 5"},
		{name: "submit", keys: join(tuitest.Type("5"), tuitest.Keys("tab"), tuitest.Type(" INC-1 "), tuitest.Keys("enter")),
			wantFocus: "why", wantClosed: true, wantSubmits: true, wantValues: form.Values{"rate": "5", "why": "INC-1"}},
		{name: "esc cancels", keys: tuitest.Keys("esc"), wantFocus: "rate", wantClosed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := form.New(tuitest.Context(80, 21), spec())
			var msgs []tea.Msg
			for _, k := range tt.keys {
				var got []tea.Msg
				m, got = tuitest.Drive(t, m, update, nil, k)
				msgs = append(msgs, got[1:]...)
			}
			if m.Focused() != tt.wantFocus || m.Err() != tt.wantErr {
				t.Errorf("focus %q err %q, want %q %q", m.Focused(), m.Err(), tt.wantFocus, tt.wantErr)
			}
			var closed, subs bool
			for _, msg := range msgs {
				switch msg := msg.(type) {
				case form.ClosedMsg:
					closed = true
				case submitted:
					subs = true
					for k, v := range tt.wantValues {
						if msg.v[k] != v {
							t.Errorf("value %s = %q, want %q", k, msg.v[k], v)
						}
					}
				}
			}
			if closed != tt.wantClosed || subs != tt.wantSubmits {
				t.Errorf("closed %v submitted %v, want %v %v", closed, subs, tt.wantClosed, tt.wantSubmits)
			}
		})
	}
}

func join(parts ...[]tea.Msg) []tea.Msg {
	var out []tea.Msg
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"120x40", 120, 40}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			m := form.New(tuitest.Context(size.w, size.h), spec())
			m, _ = tuitest.Drive(t, m, update, nil, join(tuitest.Type("7"), tuitest.Keys("enter", "enter"))...)
			view := m.View()
			if !strings.Contains(view, "rate: want 5") {
				t.Errorf("view:\n%s", view)
			}
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}

// TestLongLinesWrap: a line wider than the box wraps at spaces instead of
// being cut at its edge, so that the approve dialog shows the whole cohort
// hash, whose last characters an approver compares, and every warning ends.
func TestLongLinesWrap(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("3f9a", 16)
	s := spec()
	s.Lines = []string{"cohort hash " + hash + ": you approve exactly these letters",
		"VIA EXCHANGE: every queue bound to the letters' original exchange gets a copy, not only the queue each failed in."}
	for _, size := range []struct{ w, h int }{{80, 24}, {200, 50}} {
		view := form.New(tuitest.Context(size.w, size.h), s).View()
		for _, want := range []string{hash + ":", "each failed in."} {
			if !strings.Contains(view, want) {
				t.Errorf("at %dx%d the form does not show %q whole:\n%s", size.w, size.h, want, view)
			}
		}
		tuitest.AssertFits(t, view, size.w, size.h)
	}
}
