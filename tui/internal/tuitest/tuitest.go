// Package tuitest helps test the TUI's screens: a harness that makes any
// screen a tea.Model for teatest, a driver that runs a screen's commands
// synchronously for table tests, and fakes of the screens' own ports (the
// run and audit screens'). The fake services and letter factories the
// commands' tests share are in internal/fixture/fakes.
package tuitest

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// Context returns a frame of width × height with the Ascii theme and the
// fakes' stopped clock (fakes.Now), and the drivers' systems.
func Context(width, height int) frame.Context {
	ctx := frame.NewContext(width, height, frame.AsciiRenderer(), fakes.Now)
	ctx.Systems = registry.Systems()
	return ctx
}

// Screen is what every TUI screen offers.
type Screen[M any] interface {
	Update(tea.Msg) (M, tea.Cmd)
	View() string
	SetFrame(frame.Context) M
}

// Harness makes a screen a tea.Model: it sizes the screen from
// tea.WindowSizeMsg and starts with Init.
type Harness[M Screen[M]] struct {
	M     M
	First tea.Cmd
}

// Wrap returns the harness of m, running init first.
func Wrap[M Screen[M]](m M, init tea.Cmd) Harness[M] { return Harness[M]{M: m, First: init} }

// Init runs the screen's first command.
func (h Harness[M]) Init() tea.Cmd { return h.First }

// Update sizes or updates the screen.
func (h Harness[M]) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if ws, ok := msg.(tea.WindowSizeMsg); ok {
		h.M = h.M.SetFrame(Context(ws.Width, ws.Height))
		return h, nil
	}
	var cmd tea.Cmd
	h.M, cmd = h.M.Update(msg)
	return h, cmd
}

// View is the screen's view.
func (h Harness[M]) View() string { return h.M.View() }

// Drive feeds msgs to update one by one and runs every command that
// results, synchronously and breadth first, until none is left. It fails t
// on a command that blocks (a timer), so that a test never sleeps. It
// returns the messages the commands produced, in order.
func Drive[M any](t testing.TB, m M, update func(M, tea.Msg) (M, tea.Cmd), first tea.Cmd, msgs ...tea.Msg) (M, []tea.Msg) {
	t.Helper()
	var seen []tea.Msg
	queue := []tea.Cmd{first}
	for _, msg := range msgs {
		queue = append(queue, func() tea.Msg { return msg })
	}
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 10000 {
			t.Fatalf("Drive: more than 10000 commands: a loop?")
		}
		cmd := queue[0]
		queue = queue[1:]
		if cmd == nil {
			continue
		}
		msg := runCmd(t, cmd)
		switch msg := msg.(type) {
		case nil:
			continue
		case tea.BatchMsg:
			queue = append(append([]tea.Cmd(nil), msg...), queue...)
			continue
		}
		seen = append(seen, msg)
		var next tea.Cmd
		m, next = update(m, msg)
		queue = append(queue, next)
	}
	return m, seen
}

func runCmd(t testing.TB, cmd tea.Cmd) tea.Msg {
	t.Helper()
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	select {
	case msg := <-done:
		return msg
	case <-time.After(5 * time.Second):
		t.Fatalf("Drive: a command blocked for 5s (a timer or an unanswered call)")
		return nil
	}
}

// Key is the tea.KeyMsg of a key name as key.Binding spells it: "enter",
// "esc", "up", "pgdown", "ctrl+c", "tab", "shift+tab", " " or one rune.
func Key(name string) tea.KeyMsg {
	switch name {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "ctrl+r":
		return tea.KeyMsg{Type: tea.KeyCtrlR}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(name)}
}

// Keys returns the key messages of names.
func Keys(names ...string) []tea.Msg {
	out := make([]tea.Msg, len(names))
	for i, n := range names {
		out[i] = Key(n)
	}
	return out
}

// Type returns the key messages that type s.
func Type(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		out = append(out, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return out
}

// AssertSafe fails t when view holds a control character other than
// newline: nothing a letter carried may reach the terminal raw.
func AssertSafe(t testing.TB, view string) {
	t.Helper()
	for i, r := range view {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Fatalf("view holds control character %U at byte %d: %q", r, i, view[max(0, i-40):min(len(view), i+40)])
		}
	}
}

// AssertFits fails t unless view is exactly height lines of at most width
// cells.
func AssertFits(t testing.TB, view string, width, height int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != height {
		t.Fatalf("view has %d lines, want %d:\n%s", len(lines), height, view)
	}
	for i, l := range lines {
		if w := frameWidth(l); w > width {
			t.Fatalf("line %d is %d cells wide, more than %d: %q", i, w, width, l)
		}
	}
}
