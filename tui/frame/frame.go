// Package frame holds what every screen of the terminal UI shares: the size
// of the area it draws into, the theme, the clock, the messages screens send
// to the root model, and small layout helpers (fitting text into a box,
// tables, ages).
package frame

import (
	"context"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Context is the shared state a screen draws with. The root model owns it
// and hands a copy to every screen when the terminal is resized.
type Context struct {
	// Width and Height are the body area a screen may fill, in cells.
	Width, Height int
	Theme         *Theme
	// Now is the clock ages are computed from.
	Now func() time.Time
	// Systems say how each queue system reads, from the drivers.
	Systems deadletter.Systems
}

// NewContext returns a context of the given body size with a theme from r
// and clock now (time.Now when nil).
func NewContext(width, height int, r *lipgloss.Renderer, now func() time.Time) Context {
	if now == nil {
		now = time.Now
	}
	return Context{Width: width, Height: height, Theme: NewTheme(r), Now: now}
}

// Theme is the styles of the UI, all made from one renderer so that NO_COLOR
// (an Ascii profile) drops every colour and attribute at once. Nothing the
// UI shows relies on style alone: the selected row has a ">" marker, the
// active tab brackets, marked rows a "*".
type Theme struct {
	Renderer *lipgloss.Renderer
	Title    lipgloss.Style
	Header   lipgloss.Style
	Selected lipgloss.Style
	Dim      lipgloss.Style
	Warn     lipgloss.Style
	Error    lipgloss.Style
	Notice   lipgloss.Style
	Good     lipgloss.Style
	Tab      lipgloss.Style
	TabOn    lipgloss.Style
	Key      lipgloss.Style
	Box      lipgloss.Style
}

// NewTheme returns the theme rendered through r; nil means a renderer on
// stdout with whatever profile lipgloss detects.
func NewTheme(r *lipgloss.Renderer) *Theme {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	return &Theme{
		Renderer: r,
		Title:    r.NewStyle().Bold(true),
		Header:   r.NewStyle().Bold(true).Underline(true),
		Selected: r.NewStyle().Reverse(true),
		Dim:      r.NewStyle().Faint(true),
		Warn:     r.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		Error:    r.NewStyle().Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1")).Bold(true),
		Notice:   r.NewStyle().Foreground(lipgloss.Color("0")).Background(lipgloss.Color("6")),
		Good:     r.NewStyle().Foreground(lipgloss.Color("2")),
		Tab:      r.NewStyle().Faint(true),
		TabOn:    r.NewStyle().Bold(true).Underline(true),
		Key:      r.NewStyle().Bold(true),
		Box:      r.NewStyle().Border(lipgloss.NormalBorder()).Padding(0, 1),
	}
}

// AsciiRenderer returns a renderer that never emits colour or attributes,
// for NO_COLOR and for tests.
func AsciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// Outcome is implemented by every message that carries the result of a
// service call. The root model turns failures into the banner (or a toast
// for a governance refusal) and clears the outage banner on success.
type Outcome interface {
	Outcome() error
}

// NoticeMsg asks the root to show Text as a toast.
type NoticeMsg struct{ Text string }

// RefreshMsg asks every screen to reload what it shows, after an action
// changed the archive or the requests.
type RefreshMsg struct{}

// ShowLettersMsg opens the letter list with Filter.
type ShowLettersMsg struct{ Filter deadletter.Filter }

// ShowLetterMsg opens the detail screen on letter ID.
type ShowLetterMsg struct{ ID int64 }

// RunRequestMsg opens the run screen and starts request ID.
type RunRequestMsg struct{ ID int64 }

// BackMsg returns to the previous screen.
type BackMsg struct{}

// Send returns a command that yields msg.
func Send(msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }

// Fit cuts or pads s to exactly width × height cells, so that a screen can
// never push the layout around whatever its content.
func Fit(s string, width, height int) string {
	if width <= 0 || height <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		lines[i] = Pad(l, width)
	}
	for len(lines) < height {
		lines = append(lines, strings.Repeat(" ", width))
	}
	return strings.Join(lines, "\n")
}

// Pad cuts s (which may hold styles) to width cells, ending it with "…" when
// cut, and pads it with spaces to exactly width.
func Pad(s string, width int) string {
	if width <= 0 {
		return ""
	}
	w := ansi.StringWidth(s)
	if w > width {
		s = ansi.Truncate(s, width, "…")
		w = ansi.StringWidth(s)
	}
	return s + strings.Repeat(" ", max(0, width-w))
}

// Age shows how long ago t was: "45s", "12m", "3h05m", "4d".
func Age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.UTC().Format("01-02 15:04")
	case d < time.Minute:
		return itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		m := int(d.Minutes()) % 60
		return itoa(int(d.Hours())) + "h" + string(rune('0'+m/10)) + string(rune('0'+m%10)) + "m"
	default:
		return itoa(int(d.Hours()/24)) + "d"
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// CallTimeout bounds one service call, so that a database that stopped
// answering turns into a banner instead of a screen that waits forever.
const CallTimeout = 15 * time.Second

// Call returns the context a command passes to a service call.
func Call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CallTimeout)
}
