package detail_test

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

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/tui/detail"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m detail.Model, msg tea.Msg) (detail.Model, tea.Cmd) { return m.Update(msg) }

// hostileArchive holds letter 7 whose payload and headers try to take over
// the terminal, and letter 8 with a binary payload.
func hostileArchive() *fakes.Archive {
	a := fakes.NewArchive(fakes.HostileLetter(7), fakes.Letter(8))
	d := fakes.DetailOf(fakes.HostileLetter(7), []byte(fakes.Hostile+"\n\tsecond line"))
	d.Headers = deadletter.EncodeHeaders(map[string]any{
		"x-error-class": "x\x1b]0;pwned\x07", "x-last-error": fakes.Hostile,
		"x-\x1b[2Jkey": map[string]any{"nested": "\x1b[10;10H"}, "x-bytes": []byte{0, 1, 0x1b, 0xff},
	})
	d.Incarnations = []deadletter.Row{fakes.Letter(3)}
	a.SetDetail(d)
	bin := make([]byte, 64)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	a.SetDetail(fakes.DetailOf(fakes.Letter(8), bin))
	return a
}

func TestHostileLetterIsEscaped(t *testing.T) {
	t.Parallel()
	archive := hostileArchive()
	m := detail.New(tuitest.Context(80, 200), tuitest.Services(archive, fakes.NewRequests("alice")))
	m, first := m.Open(7)
	m, _ = tuitest.Drive(t, m, update, first)
	view := m.View()
	tuitest.AssertSafe(t, view)
	for _, want := range []string{`\x1b]0;pwned\x07`, `\x1b[2J`, `\x1b[10;10H`, `\u009b31m`, "x-\\x1b[2Jkey", "earlier #3", "x-death", "rejected"} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
	if len(archive.Shows) != 1 || archive.Shows[0] != 7 {
		t.Errorf("Archive.Show calls = %v, want one for 7 (it audits the payload view)", archive.Shows)
	}

	m, _ = tuitest.Drive(t, m, update, func() tea.Msg { return nil })
	m, first = m.Open(8)
	m, _ = tuitest.Drive(t, m, update, first)
	if view := m.View(); !strings.Contains(view, "00000000  00 07 0e 15 1c 23 2a 31  38 3f 46 4d 54 5b 62 69  |.....#*18?FMT[bi|") {
		t.Errorf("binary payload not hex-dumped:\n%s", view)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want func(tea.Msg) bool
	}{
		{name: "esc goes back", key: "esc", want: func(m tea.Msg) bool { _, ok := m.(frame.BackMsg); return ok }},
		{name: "r opens the replay form", key: "r", want: func(m tea.Msg) bool {
			o, ok := m.(form.OpenMsg)
			return ok && o.Spec.Title == "Request a replay of dead letter 7"
		}},
		{name: "d opens the discard form", key: "d", want: func(m tea.Msg) bool {
			o, ok := m.(form.OpenMsg)
			return ok && o.Spec.Title == "Request a discard of dead letter 7"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := detail.New(tuitest.Context(80, 21), tuitest.Services(hostileArchive(), fakes.NewRequests("alice")))
			m, first := m.Open(7)
			m, _ = tuitest.Drive(t, m, update, first)
			_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key(tt.key))
			if len(msgs) < 2 || !tt.want(msgs[len(msgs)-1]) {
				t.Errorf("messages %v", msgs)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	m := detail.New(tuitest.Context(80, 21), tuitest.Services(fakes.Letters(3), fakes.NewRequests("alice")))
	m, first := m.Open(99)
	m, _ = tuitest.Drive(t, m, update, first)
	if !strings.Contains(m.View(), "dead letter 99 not found") {
		t.Errorf("view:\n%s", m.View())
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
			m := detail.New(tuitest.Context(size.w, size.h), tuitest.Services(hostileArchive(), fakes.NewRequests("alice")))
			m, first := m.Open(7)
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("Dead letter 7")) },
				teatest.WithDuration(5*time.Second))
			tm.Send(tuitest.Key("down"))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			view := tm.FinalModel(t).View()
			tuitest.AssertSafe(t, view)
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}
