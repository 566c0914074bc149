package tui

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
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m Model, msg tea.Msg) (Model, tea.Cmd) {
	nm, cmd := m.Update(msg)
	return nm.(Model), cmd
}

type bundle struct {
	archive  *fakes.Archive
	requests *fakes.Requests
}

// setup returns the TUI as actor at 80×24 after its first data arrived.
func setup(t *testing.T, actor string) (Model, *bundle) {
	t.Helper()
	b := &bundle{archive: fakes.Letters(300), requests: fakes.NewRequests(actor, fakes.Request(1, "alice", 2))}
	svc := tuitest.Services(b.archive, b.requests)
	svc.Audit = tuitest.NewAudit(50)
	m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
	m, _ = tuitest.Drive(t, m, update, m.Init(), tea.WindowSizeMsg{Width: 80, Height: 24})
	return m, b
}

// press sends keys one at a time with what each causes.
func press(t *testing.T, m Model, keys ...tea.Msg) (Model, []tea.Msg) {
	t.Helper()
	var all []tea.Msg
	for _, k := range keys {
		var msgs []tea.Msg
		m, msgs = tuitest.Drive(t, m, update, nil, k)
		all = append(all, msgs...)
	}
	tuitest.AssertFits(t, m.View(), m.width, m.height)
	tuitest.AssertSafe(t, m.View())
	return m, all
}

func TestNavigation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		keys       []tea.Msg
		wantScreen Screen
		wantForm   bool
		wantText   string
	}{
		{name: "starts on the summary", wantScreen: ScreenSummary, wantText: "[1 Summary]"},
		{name: "enter lists the category", keys: tuitest.Keys("down", "enter"), wantScreen: ScreenLetters, wantText: "reason=transient-exhausted"},
		{name: "enter on a letter shows it", keys: tuitest.Keys("2", "enter"), wantScreen: ScreenDetail, wantText: "[2 Letters › 300]"},
		{name: "esc from the detail goes back", keys: tuitest.Keys("2", "enter", "esc"), wantScreen: ScreenLetters},
		{name: "esc twice goes back to the summary", keys: tuitest.Keys("2", "enter", "esc", "esc"), wantScreen: ScreenSummary},
		{name: "r on the detail opens the request form", keys: tuitest.Keys("2", "enter", "r"), wantScreen: ScreenDetail, wantForm: true, wantText: "Request a replay of dead letter 300"},
		{name: "tab cycles", keys: tuitest.Keys("tab", "tab", "tab"), wantScreen: ScreenAudit, wantText: "chain: OK"},
		{name: "shift+tab wraps", keys: tuitest.Keys("shift+tab"), wantScreen: ScreenRun, wantText: "no run"},
		{name: "3 shows requests", keys: tuitest.Keys("3"), wantScreen: ScreenRequests, wantText: "INC-4211"},
		{name: "? shows all keys", keys: tuitest.Keys("2", "?"), wantScreen: ScreenLetters, wantText: "discard filter"},
		{name: "any key closes help", keys: tuitest.Keys("?", "x"), wantScreen: ScreenSummary, wantText: "Dead letters by reason"},
		{name: "q typed in the search does not quit", keys: append(tuitest.Keys("2", "/"), tuitest.Type("q1")...), wantScreen: ScreenLetters, wantText: "/q1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := setup(t, "bob")
			m, _ = press(t, m, tt.keys...)
			if m.Active() != tt.wantScreen || m.FormOpen() != tt.wantForm {
				t.Errorf("screen %d form %v, want %d %v", m.Active(), m.FormOpen(), tt.wantScreen, tt.wantForm)
			}
			if !strings.Contains(m.View(), tt.wantText) {
				t.Errorf("view lacks %q:\n%s", tt.wantText, m.View())
			}
		})
	}
}

func quits(msgs []tea.Msg) bool {
	for _, m := range msgs {
		if _, ok := m.(tea.QuitMsg); ok {
			return true
		}
	}
	return false
}

func TestQuit(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]tea.Msg{tuitest.Keys("q"), tuitest.Keys("ctrl+c"), tuitest.Keys("2", "r", "ctrl+c"), tuitest.Keys("?", "q")} {
		m, _ := setup(t, "bob")
		if _, msgs := press(t, m, keys...); !quits(msgs) {
			t.Errorf("%v did not quit", keys)
		}
	}
}

func TestRequestFromTheList(t *testing.T) {
	t.Parallel()
	m, b := setup(t, "alice")
	keys := append(tuitest.Keys("2", " ", " ", "r"), tuitest.Type("5")...)
	keys = append(keys, tuitest.Key("enter"), tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("INC-77")...)
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("the database failed over")...) // same handler ok
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("yes")...) // include permanent
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("yes")...) // via exchange
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("the other site captures the DLQ")...) // unwatched
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("after lunch")...) // not before, unreadable
	keys = append(keys, tuitest.Key("enter"))
	keys = append(keys, tuitest.Type("yes")...) // include not due
	m, _ = press(t, m, append(keys, tuitest.Key("enter"))...)
	if !m.FormOpen() || !strings.Contains(m.View(), `not before: invalid time "after lunch"`) {
		t.Fatalf("an unreadable not-before was taken:\n%s", m.View())
	}
	keys = append(tuitest.Keys("ctrl+u"), tuitest.Type("90m")...) // the form is back on not before
	keys = append(keys, tuitest.Key("enter"), tuitest.Key("enter"))
	submitted := time.Now()
	m, _ = press(t, m, keys...)
	if m.FormOpen() {
		t.Fatalf("form still open:\n%s", m.View())
	}
	if len(b.requests.Created) != 1 || len(b.requests.Created[0].Selection.IDs) != 2 || b.requests.Created[0].Rate != 5 {
		t.Fatalf("created %+v", b.requests.Created)
	}
	if c := b.requests.Created[0]; c.SameHandlerWhy != "the database failed over" || !c.IncludePermanent || !c.ViaExchange ||
		c.UnwatchedWhy != "the other site captures the DLQ" {
		t.Errorf("created same-handler-ok %q, include-permanent %v, via-exchange %v, unwatched %q",
			c.SameHandlerWhy, c.IncludePermanent, c.ViaExchange, c.UnwatchedWhy)
	}
	if c := b.requests.Created[0]; c.NotBefore == nil || c.NotBefore.Sub(submitted) < 89*time.Minute ||
		c.NotBefore.Sub(submitted) > 91*time.Minute || !c.IncludeNotDue {
		t.Errorf("created not-before %v (submitted %v), include-not-due %v; want 90 minutes on, and yes", c.NotBefore, submitted, c.IncludeNotDue)
	}
	if !strings.Contains(m.Banner(), "replay request 2 is pending: 2 letters") {
		t.Errorf("banner %q", m.Banner())
	}
	if !strings.Contains(m.View(), "in_request") {
		t.Errorf("the requested letters should show in_request:\n%s", m.View())
	}
}

func TestRefusalIsAToast(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "alice")
	keys := append(tuitest.Keys("3", "a"), tuitest.Type("looks fine")...)
	m, _ = press(t, m, append(keys, tuitest.Key("enter"))...)
	want := "refused by rule four-eyes: alice requested replay request 1 and cannot review it"
	if !strings.Contains(m.Banner(), want) {
		t.Fatalf("banner %q, want %q", m.Banner(), want)
	}
	if !strings.Contains(strings.ReplaceAll(m.View(), "\n", ""), "refused by rule four-eyes") {
		t.Errorf("view:\n%s", m.View())
	}
	// The screen still works.
	m, _ = press(t, m, tuitest.Keys("1")...)
	if m.Active() != ScreenSummary {
		t.Errorf("screen %d after the refusal", m.Active())
	}
}

func TestOutageBannerAndRecovery(t *testing.T) {
	t.Parallel()
	m, b := setup(t, "bob")
	down := errors.New("failed to connect to `host=127.0.0.1 user=root database=expiryctl`: dial error (dial tcp 127.0.0.1:5432: connect: connection refused)")
	b.archive.SetErr(down)
	b.requests.SetErr(down)
	m, _ = tuitest.Drive(t, m, update, nil, tickMsg{})
	if !strings.HasPrefix(m.Banner(), "database unavailable: failed to connect") {
		t.Fatalf("banner %q", m.Banner())
	}
	v := m.View()
	tuitest.AssertFits(t, v, 80, 24)
	if !strings.Contains(v, "transient-exhausted") {
		t.Errorf("the last data should stay on screen:\n%s", v)
	}
	// Keys still work during the outage.
	m, _ = press(t, m, tuitest.Keys("2")...)
	m, _ = press(t, m, tuitest.Keys("1")...)
	b.archive.SetErr(nil)
	b.requests.SetErr(nil)
	m, _ = tuitest.Drive(t, m, update, nil, tickMsg{})
	if m.Banner() != "" {
		t.Errorf("banner %q after recovery, want none", m.Banner())
	}
}

func TestResize(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "bob")
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 40}, {60, 15}, {200, 60}, {80, 24}} {
		for _, k := range []string{"1", "2", "3", "4", "5"} {
			m, _ = press(t, m, tea.WindowSizeMsg{Width: size.w, Height: size.h}, tuitest.Key(k))
			tuitest.AssertFits(t, m.View(), size.w, size.h)
		}
	}
}

func TestNoColor(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "bob")
	if strings.Contains(m.View(), "\x1b") {
		t.Errorf("an Ascii renderer still drew escape codes")
	}
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.TrueColor)
	c := New(tuitest.Services(fakes.Letters(3), fakes.NewRequests("bob")), WithRenderer(r), WithRefresh(0))
	if !strings.Contains(c.View(), "\x1b[") {
		t.Errorf("a colour renderer drew no styles: the theme does not use the renderer")
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"120x40", 120, 40}, {"200x50", 200, 50}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			svc := tuitest.Services(fakes.Letters(300), fakes.NewRequests("bob", fakes.Request(1, "alice", 2)))
			m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(time.Hour))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("pending 1")) },
				teatest.WithDuration(5*time.Second))
			tm.Send(tuitest.Key("q"))
			final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
			view := final.View()
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}

func TestRunScreen(t *testing.T) {
	t.Parallel()
	approved := fakes.Request(1, "alice", 4)
	approved.Status = replay.StatusApproved
	reqs := fakes.NewRequests("bob", approved)
	svc := tuitest.Services(fakes.Letters(5), reqs)
	svc.Runner = &tuitest.Runner{Summary: RunSummary{Status: replay.StatusCompleted, Final: RunProgress{Total: 4, Done: 4, Confirmed: 4}}}
	m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
	m, _ = tuitest.Drive(t, m, update, m.Init())
	m, _ = press(t, m, tuitest.Keys("3", "g")...)
	if m.Active() != ScreenRun || !strings.Contains(m.View(), "4/4 settled (100%)") {
		t.Fatalf("screen %d:\n%s", m.Active(), m.View())
	}
	if !strings.Contains(m.Banner(), "replay request 1 completed: 4 confirmed") {
		t.Errorf("banner %q", m.Banner())
	}
}

func TestFastKeysAreSplit(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "bob")
	m, _ = press(t, m, tuitest.Key("2"), tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjjk")})
	if m.Active() != ScreenLetters || m.Letters().Cursor() != 2 {
		t.Errorf("\"jjjk\" read at once: screen %d cursor %d, want the letters at 2", m.Active(), m.Letters().Cursor())
	}
	m, _ = press(t, m, tuitest.Key("/"), tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r-1")})
	if !strings.Contains(m.View(), "/r-1") {
		t.Errorf("text typed fast into the search was split:\n%s", m.View())
	}
}

// TestHeaderSaysWho: alice's and bob's windows side by side differ in
// their headers: the login, and what its groups let it do; a label given
// with --actor is shown with the login behind it.
func TestHeaderSaysWho(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, actor string
		id          Identity
		w           int
		want        string
	}{
		{"alice at 80", "", tuitest.Identity("alice"), 80, "alice · ingester+operator"},
		{"bob at 80", "", tuitest.Identity("bob"), 80, "bob · approver"},
		{"bob at 200", "", tuitest.Identity("bob"), 200, "expiryctl · bob · approver"},
		{"a label at 200", "oncall", tuitest.Identity("alice"), 200, "expiryctl · oncall (login alice) · ingester+operator"},
		{"the superuser", "", Identity{Login: "root", Advisory: true}, 80, "root · advisory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := tuitest.Services(fakes.Letters(3), fakes.NewRequests(tc.actor))
			svc.Identity = tc.id
			m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
			m, _ = tuitest.Drive(t, m, update, m.Init(), tea.WindowSizeMsg{Width: tc.w, Height: 24})
			header := strings.TrimRight(strings.SplitN(m.View(), "\n", 2)[0], " ")
			if !strings.HasSuffix(header, " "+tc.want) {
				t.Errorf("header %q, want it to end with %q", header, tc.want)
			}
		})
	}
}

// TestApprovedSaysWhoRuns: an approver who is no operator is told who runs
// the request, not to press a key that would be refused.
func TestApprovedSaysWhoRuns(t *testing.T) {
	t.Parallel()
	done := action.DoneMsg{Verb: "approve", Request: replay.Request{ID: 7, Kind: replay.KindReplay, RequestedBy: "alice", ReviewedBy: "bob"}}
	if got := done.Notice(tuitest.Identity("bob")); strings.Contains(got, "press g") || !strings.Contains(got, "an operator runs it (alice requested it)") ||
		!strings.Contains(got, "`expiryctl replay run 7`") {
		t.Errorf("to bob: %q", got)
	}
	if got := done.Notice(Identity{Login: "dora", Roles: []string{"operator", "approver"}}); !strings.HasSuffix(got, "press g on it to run it") {
		t.Errorf("to an operator: %q", got)
	}
}

// TestLettersGolden draws the letter list after a capture and a tick: the
// new letters are at the top, and the help line says how to reload.
func TestLettersGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"200x50", 200, 50}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			archive := fakes.Letters(300)
			svc := tuitest.Services(archive, fakes.NewRequests("alice"))
			m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
			m, _ = tuitest.Drive(t, m, update, m.Init(), tea.WindowSizeMsg{Width: size.w, Height: size.h})
			m, _ = press(t, m, tuitest.Keys("2", "down")...)
			archive.Capture(fakes.Letter(301), fakes.Letter(302))
			m, _ = tuitest.Drive(t, m, update, nil, tickMsg{})
			view := m.View()
			if !strings.Contains(view, "ctrl+r reload") || !strings.Contains(view, "letter 4 of 302") {
				t.Errorf("want the new letters counted and ctrl+r in the help line:\n%s", view)
			}
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}
