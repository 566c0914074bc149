package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
)

// KeyMap is the keys that work on every screen (unless a text input has
// them).
type KeyMap struct {
	Summary, Letters, Requests, Audit, Run key.Binding
	Next, Prev                             key.Binding
	Help, Quit                             key.Binding
	// Interrupt quits like q, and even while a text input has the keys;
	// the command then exits 130, as an interrupt does.
	Interrupt key.Binding
}

// DefaultKeyMap is the global default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Summary:   key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "summary")),
		Letters:   key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "letters")),
		Requests:  key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "requests")),
		Audit:     key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "audit")),
		Run:       key.NewBinding(key.WithKeys("5"), key.WithHelp("5", "run")),
		Next:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next screen")),
		Prev:      key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous screen")),
		Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "keys")),
		Quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		Interrupt: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	}
}

// helpKeys joins a screen's keys with the global ones for the help view.
// While a text input has the keys (typing), q and ? type into it, so the
// help line offers ctrl+c to quit instead; while the quit question is
// shown (asking), only its keys work.
type helpKeys struct {
	global         KeyMap
	screen         help.KeyMap
	typing, asking bool
}

func (h helpKeys) ShortHelp() []key.Binding {
	var out []key.Binding
	if h.typing && !h.asking {
		// First, so that a narrow help line never cuts it off.
		out = append(out, h.global.Interrupt)
	}
	if h.screen != nil {
		out = append(out, h.screen.ShortHelp()...)
	}
	if h.asking || h.typing {
		return out
	}
	return append(out, h.global.Help, h.global.Quit)
}

func (h helpKeys) FullHelp() [][]key.Binding {
	var out [][]key.Binding
	if h.screen != nil {
		out = append(out, h.screen.FullHelp()...)
	}
	g := h.global
	return append(out, []key.Binding{g.Summary, g.Letters, g.Requests, g.Audit, g.Run, g.Next, g.Prev, g.Help, g.Quit, g.Interrupt})
}

// helpKeys are the keys the help line and the help view show now.
func (m Model) helpKeys() helpKeys {
	return helpKeys{global: m.keys, screen: m.screenKeys(), typing: m.form != nil || m.capturing(), asking: m.quitting != quitNone}
}
