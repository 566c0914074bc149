// Package detail is the TUI's view of one dead letter: everything `dlq show`
// shows, in a scrollable viewport. Opening it calls Archive.Show, which
// audits the payload view.
package detail

import (
	"errors"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// LoadedMsg carries the letter asked for.
type LoadedMsg struct {
	ID     int64
	Detail deadletter.Detail
	Err    error
}

// Outcome makes LoadedMsg a frame.Outcome.
func (m LoadedMsg) Outcome() error { return m.Err }

// KeyMap is the detail screen's keys.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Replay, Discard, Back                   key.Binding
}

// DefaultKeyMap is the detail screen's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "f", " "), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
		Replay:   key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "request replay")),
		Discard:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "request discard")),
		Back:     key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back")),
	}
}

// ShortHelp is the detail screen's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Down, k.PageDown, k.Replay, k.Discard, k.Back}
}

// FullHelp is the detail screen's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, {k.Replay, k.Discard, k.Back}}
}

// Model is the detail screen.
type Model struct {
	ctx    frame.Context
	svc    backend.Services
	keys   KeyMap
	id     int64
	detail *deadletter.Detail
	err    error
	vp     viewport.Model
}

// New returns an empty detail screen over svc.
func New(ctx frame.Context, svc backend.Services) Model {
	m := Model{ctx: ctx, svc: svc, keys: DefaultKeyMap(), vp: viewport.New(ctx.Width, max(1, ctx.Height-1))}
	return m
}

// Keys returns the detail screen's key map.
func (m Model) Keys() KeyMap { return m.keys }

// Capturing is false: the detail screen has no text input.
func (m Model) Capturing() bool { return false }

// ID is the letter shown (0: none yet).
func (m Model) ID() int64 { return m.id }

// Detail is the letter shown, once loaded.
func (m Model) Detail() (deadletter.Detail, bool) {
	if m.detail == nil {
		return deadletter.Detail{}, false
	}
	return *m.detail, true
}

// SetFrame resizes the screen, re-wrapping the content.
func (m Model) SetFrame(ctx frame.Context) Model {
	m.ctx = ctx
	m.vp.Width, m.vp.Height = ctx.Width, max(1, ctx.Height-1)
	m.setContent()
	return m
}

// Open shows letter id, loading it through Archive.Show.
func (m Model) Open(id int64) (Model, tea.Cmd) {
	m.id, m.detail, m.err = id, nil, nil
	m.vp.SetContent("")
	m.vp.GotoTop()
	return m, m.load()
}

// Refresh retries a failed load.
func (m Model) Refresh() tea.Cmd {
	if m.err != nil && m.id != 0 {
		return m.load()
	}
	return nil
}

func (m Model) load() tea.Cmd {
	archive, id := m.svc.Archive, m.id
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		d, err := archive.Show(ctx, id)
		return LoadedMsg{ID: id, Detail: d, Err: err}
	}
}

func (m *Model) setContent() {
	if m.detail == nil {
		return
	}
	width := max(10, m.ctx.Width)
	// The view wraps its fields under their values; what is left wider
	// (the payload) wraps at spaces, never inside a word.
	m.vp.SetContent(linewrap.Words(Render(m.ctx, *m.detail, width), width))
}

// Update handles keys and the loaded letter.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		if msg.ID != m.id {
			return m, nil
		}
		if msg.Err != nil {
			m.err = msg.Err
			return m, nil
		}
		d := msg.Detail
		m.detail, m.err = &d, nil
		m.setContent()
	case action.DoneMsg:
		if msg.Err == nil && m.detail != nil && len(msg.Letters) > 0 && msg.Letters[0] == m.id && msg.Verb != "approve" {
			return m, m.load()
		}
	case tea.KeyMsg:
		k := m.keys
		switch {
		case key.Matches(msg, k.Back):
			return m, frame.Send(frame.BackMsg{})
		case key.Matches(msg, k.Up):
			m.vp.ScrollUp(1)
		case key.Matches(msg, k.Down):
			m.vp.ScrollDown(1)
		case key.Matches(msg, k.PageUp):
			m.vp.PageUp()
		case key.Matches(msg, k.PageDown):
			m.vp.PageDown()
		case key.Matches(msg, k.Top):
			m.vp.GotoTop()
		case key.Matches(msg, k.Bottom):
			m.vp.GotoBottom()
		case key.Matches(msg, k.Replay), key.Matches(msg, k.Discard):
			if m.detail == nil {
				return m, nil
			}
			kind := replay.KindReplay
			if key.Matches(msg, k.Discard) {
				kind = replay.KindDiscard
			}
			return m, action.RequestForm(m.svc, kind, action.Selection{IDs: []int64{m.id}})
		}
	}
	return m, nil
}

// View renders the letter, or what stands in for it.
func (m Model) View() string {
	th := m.ctx.Theme
	var body string
	switch {
	case m.id == 0:
		body = "no letter selected: press enter on a letter in the list"
	case m.err != nil && errors.Is(m.err, deadletter.ErrNotFound):
		body = fmt.Sprintf("dead letter %d not found", m.id)
	case m.detail == nil && m.err != nil:
		body = fmt.Sprintf("could not load dead letter %d; retrying", m.id)
	case m.detail == nil:
		body = fmt.Sprintf("loading dead letter %d…", m.id)
	default:
		status := fmt.Sprintf("letter %d · line %d/%d · %3.0f%%", m.id, m.vp.YOffset+1, max(1, m.vp.TotalLineCount()), m.vp.ScrollPercent()*100)
		return frame.Fit(m.vp.View()+"\n"+th.Dim.Render(status), m.ctx.Width, m.ctx.Height)
	}
	return frame.Fit(body, m.ctx.Width, m.ctx.Height)
}
