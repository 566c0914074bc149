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
}

// DefaultKeyMap is the global default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Summary:  key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "summary")),
		Letters:  key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "letters")),
		Requests: key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "requests")),
		Audit:    key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "audit")),
		Run:      key.NewBinding(key.WithKeys("5"), key.WithHelp("5", "run")),
		Next:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next screen")),
		Prev:     key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous screen")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "keys")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// helpKeys joins a screen's keys with the global ones for the help view.
type helpKeys struct {
	global KeyMap
	screen help.KeyMap
}

func (h helpKeys) ShortHelp() []key.Binding {
	var out []key.Binding
	if h.screen != nil {
		out = append(out, h.screen.ShortHelp()...)
	}
	return append(out, h.global.Help, h.global.Quit)
}

func (h helpKeys) FullHelp() [][]key.Binding {
	var out [][]key.Binding
	if h.screen != nil {
		out = append(out, h.screen.FullHelp()...)
	}
	g := h.global
	return append(out, []key.Binding{g.Summary, g.Letters, g.Requests, g.Audit, g.Run, g.Next, g.Prev, g.Help, g.Quit})
}
