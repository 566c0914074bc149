// Package form is the small input form the TUI uses for every governed
// action: the fields of a replay or discard request (max, rate, canary,
// why), a review's why, a filter. A screen opens one by returning OpenMsg;
// the root shows it over the body and gives it the keys until it is
// submitted or cancelled.
package form

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// Field is one input of a form.
type Field struct {
	// Key names the value in Values.
	Key string
	// Label is shown before the input; Hint after it, dimmed.
	Label, Hint string
	// Value is the initial text.
	Value string
	// Required refuses an empty (blank) value.
	Required bool
	// Validate, when set, checks a non-empty value.
	Validate func(string) error
}

// Values are a submitted form's values by field key, trimmed.
type Values map[string]string

// Spec describes a form.
type Spec struct {
	Title string
	// Lines are shown above the fields; they must already be escaped.
	Lines  []string
	Fields []Field
	// Submit runs the action with the values; its message goes to the
	// screens like any other.
	Submit func(Values) tea.Cmd
}

// OpenMsg asks the root to show a form.
type OpenMsg struct{ Spec Spec }

// ClosedMsg says the form was submitted or cancelled and should go.
type ClosedMsg struct{ Submitted bool }

// KeyMap is the form's keys.
type KeyMap struct {
	Next, Prev, Submit, Cancel key.Binding
}

// DefaultKeyMap is the form's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Next:   key.NewBinding(key.WithKeys("tab", "down"), key.WithHelp("tab", "next field")),
		Prev:   key.NewBinding(key.WithKeys("shift+tab", "up"), key.WithHelp("shift+tab", "previous")),
		Submit: key.NewBinding(key.WithKeys("enter", "ctrl+s"), key.WithHelp("enter", "next/submit")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	}
}

// ShortHelp is the form's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding { return []key.Binding{k.Submit, k.Next, k.Prev, k.Cancel} }

// FullHelp is the form's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }

// Model is an open form.
type Model struct {
	ctx    frame.Context
	spec   Spec
	inputs []textinput.Model
	focus  int
	err    string
	keys   KeyMap
}

// New builds the form of spec, its first field focused.
func New(ctx frame.Context, spec Spec) Model {
	m := Model{ctx: ctx, spec: spec, keys: DefaultKeyMap()}
	for _, f := range spec.Fields {
		in := textinput.New()
		in.Prompt = ""
		in.SetValue(f.Value)
		in.CharLimit = 500
		in.Cursor.SetMode(cursor.CursorStatic)
		in.Cursor.Style = ctx.Theme.Selected
		in.TextStyle = ctx.Theme.Renderer.NewStyle()
		in.PlaceholderStyle = ctx.Theme.Dim
		in.PromptStyle = ctx.Theme.Renderer.NewStyle()
		in.Cursor.TextStyle = ctx.Theme.Renderer.NewStyle()
		m.inputs = append(m.inputs, in)
	}
	m = m.SetFrame(ctx)
	m.focusField(0)
	return m
}

// Keys returns the form's key map.
func (m Model) Keys() KeyMap { return m.keys }

// Title is the form's title.
func (m Model) Title() string { return m.spec.Title }

// Focused is the key of the focused field.
func (m Model) Focused() string {
	if m.focus < len(m.spec.Fields) {
		return m.spec.Fields[m.focus].Key
	}
	return ""
}

// Err is the validation message shown, if any.
func (m Model) Err() string { return m.err }

// SetFrame resizes the form.
func (m Model) SetFrame(ctx frame.Context) Model {
	m.ctx = ctx
	// A line is "> label [input]" inside the box; the input draws one cell
	// more than its width for the cursor.
	prefix := 2 + m.labelWidth() + 1
	for i := range m.inputs {
		m.inputs[i].Width = max(8, m.boxWidth()-4-prefix-2-1)
	}
	return m
}

func (m Model) boxWidth() int { return max(20, min(m.ctx.Width, 78)) }

func (m Model) labelWidth() int {
	w := 0
	for _, f := range m.spec.Fields {
		w = max(w, len(f.Label))
	}
	return w
}

func (m *Model) focusField(i int) {
	for j := range m.inputs {
		m.inputs[j].Blur()
	}
	if len(m.inputs) == 0 {
		return
	}
	m.focus = (i + len(m.inputs)) % len(m.inputs)
	m.inputs[m.focus].Focus()
}

// Values returns the current values, trimmed.
func (m Model) Values() Values {
	v := Values{}
	for i, f := range m.spec.Fields {
		v[f.Key] = strings.TrimSpace(m.inputs[i].Value())
	}
	return v
}

// validate returns the index of the first bad field and why, or -1.
func (m Model) validate() (int, string) {
	vals := m.Values()
	for i, f := range m.spec.Fields {
		v := vals[f.Key]
		if v == "" {
			if f.Required {
				return i, f.Label + " is required"
			}
			continue
		}
		if f.Validate != nil {
			if err := f.Validate(v); err != nil {
				return i, fmt.Sprintf("%s: %v", f.Label, err)
			}
		}
	}
	return -1, ""
}

// Update handles a key or a message for the focused input.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok {
		switch {
		case key.Matches(k, m.keys.Cancel):
			return m, frame.Send(ClosedMsg{})
		case key.Matches(k, m.keys.Next):
			m.focusField(m.focus + 1)
			return m, nil
		case key.Matches(k, m.keys.Prev):
			m.focusField(m.focus - 1)
			return m, nil
		case key.Matches(k, m.keys.Submit):
			if k.String() == "enter" && m.focus < len(m.inputs)-1 {
				m.focusField(m.focus + 1)
				return m, nil
			}
			if i, why := m.validate(); i >= 0 {
				m.err = why
				m.focusField(i)
				return m, nil
			}
			m.err = ""
			cmds := []tea.Cmd{frame.Send(ClosedMsg{Submitted: true})}
			if m.spec.Submit != nil {
				cmds = append(cmds, m.spec.Submit(m.Values()))
			}
			return m, tea.Batch(cmds...)
		}
	}
	if len(m.inputs) == 0 {
		return m, nil
	}
	var cmd tea.Cmd
	m.inputs[m.focus], cmd = m.inputs[m.focus].Update(msg)
	return m, cmd
}

// fits says whether the form with every field's hint fits the window's
// height; when it does not, only the focused field shows its hint, so
// that the last field, the error and the keys stay on a small terminal.
func (m Model) fits() bool {
	rows := 2 + 1 + len(m.lines()) + 1 + 1 + 1 + 1 // borders, title, lines, blank, blank, error, keys
	for _, f := range m.spec.Fields {
		rows++
		if f.Hint != "" {
			rows++
		}
	}
	return rows <= m.ctx.Height
}

// lines are the spec's lines wrapped at spaces to the box: cut at its edge,
// a warning lost its end and the cohort hash an approver compares its last
// characters.
func (m Model) lines() []string {
	var out []string
	for _, l := range m.spec.Lines {
		out = append(out, strings.Split(linewrap.Words(l, m.boxWidth()-4), "\n")...)
	}
	return out
}

// View renders the form as a box, centred in the body.
func (m Model) View() string {
	th := m.ctx.Theme
	inner := m.boxWidth() - 4
	var b strings.Builder
	b.WriteString(th.Title.Render(frame.Pad(m.spec.Title, inner)) + "\n")
	for _, l := range m.lines() {
		b.WriteString(frame.Pad(l, inner) + "\n")
	}
	b.WriteString("\n")
	labelW := m.labelWidth()
	compact := !m.fits()
	for i, f := range m.spec.Fields {
		marker := " "
		if i == m.focus {
			marker = ">"
		}
		label := fmt.Sprintf("%s %-*s ", marker, labelW, f.Label)
		b.WriteString(frame.Pad(label+"["+m.inputs[i].View()+"]", inner) + "\n")
		if f.Hint != "" && (!compact || i == m.focus) {
			b.WriteString(th.Dim.Render(frame.Pad(strings.Repeat(" ", labelW+3)+f.Hint, inner)) + "\n")
		}
	}
	b.WriteString("\n")
	if m.err != "" {
		b.WriteString(th.Warn.Render(frame.Pad("! "+m.err, inner)) + "\n")
	}
	b.WriteString(th.Dim.Render(frame.Pad("enter next/submit · tab/shift+tab move · esc cancel", inner)))
	box := th.Box.Width(m.boxWidth() - 2).Render(b.String())
	return th.Renderer.Place(m.ctx.Width, m.ctx.Height, 0.5, 0.3, box)
}
