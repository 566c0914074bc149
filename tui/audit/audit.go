// Package audit is the TUI's audit screen: the trail newest first, paged by
// keyset on seq, filtered by actor, action and target, with the result of a
// verification of the hash chain.
package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/pager"
)

// PageSize is the rows fetched per page; MaxPages how many stay in memory.
const (
	PageSize = 100
	MaxPages = 4
)

// Request is a page the screen asked for.
type Request = pager.Request[int64]

// PageMsg carries one page of the trail.
type PageMsg struct {
	Req  Request
	Page backend.AuditPage
	Err  error
}

// Outcome makes PageMsg a frame.Outcome.
func (m PageMsg) Outcome() error { return m.Err }

// CheckedMsg carries a chain verification.
type CheckedMsg struct {
	Check backend.AuditCheck
	Err   error
}

// Outcome makes CheckedMsg a frame.Outcome.
func (m CheckedMsg) Outcome() error { return m.Err }

// filterMsg applies a filter chosen in the form.
type filterMsg struct{ f backend.AuditFilter }

// KeyMap is the audit screen's keys.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top key.Binding
	Filter, Clear, Verify, Back     key.Binding
}

// DefaultKeyMap is the audit screen's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "f"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "newest")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter actor/action/target")),
		Clear:    key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "clear filter")),
		Verify:   key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "verify chain")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
	}
}

// ShortHelp is the audit screen's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Filter, k.Clear, k.Verify, k.PageDown}
}

// FullHelp is the audit screen's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top}, {k.Filter, k.Clear, k.Verify, k.Back}}
}

// Model is the audit screen.
type Model struct {
	ctx      frame.Context
	svc      backend.Services
	keys     KeyMap
	filter   backend.AuditFilter
	win      *pager.Window[backend.AuditEntry, int64]
	cursor   int
	top      int
	check    *backend.AuditCheck
	checking bool
	checkErr bool
}

// New returns the audit screen over svc; it loads when first shown.
func New(ctx frame.Context, svc backend.Services) Model {
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap(), win: pager.New[backend.AuditEntry, int64](PageSize, MaxPages)}
}

// Keys returns the audit screen's key map.
func (m Model) Keys() KeyMap { return m.keys }

// Capturing is false: filters are typed in a form.
func (m Model) Capturing() bool { return false }

// Filter is the filter shown.
func (m Model) Filter() backend.AuditFilter { return m.filter }

// SetFrame resizes the screen.
func (m Model) SetFrame(ctx frame.Context) Model {
	m.ctx = ctx
	m.top = frame.Window(m.top-m.win.Base(), m.cursor-m.win.Base(), m.visible(), m.win.Loaded()) + m.win.Base()
	return m
}

// Activate loads the trail and verifies the chain the first time the screen
// is shown.
func (m Model) Activate() (Model, tea.Cmd) {
	if m.svc.Audit == nil || m.win.Started() {
		return m, nil
	}
	m, load := m.reload()
	m.checking = true
	return m, tea.Batch(load, m.verify())
}

// Refresh retries a failed fetch or verification.
func (m Model) Refresh() tea.Cmd {
	if m.svc.Audit == nil {
		return nil
	}
	var cmds []tea.Cmd
	if r, ok := m.win.Retry(); ok {
		cmds = append(cmds, m.fetch(r))
	}
	if m.checkErr && !m.checking {
		cmds = append(cmds, m.verify())
	}
	return tea.Batch(cmds...)
}

func (m Model) reload() (Model, tea.Cmd) {
	m.cursor, m.top = 0, 0
	return m, m.fetch(m.win.Reset())
}

func (m Model) fetch(r Request) tea.Cmd {
	trail, f := m.svc.Audit, m.filter
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		var before int64
		if r.After != nil {
			before = *r.After
		}
		page, err := trail.List(ctx, f, before, PageSize)
		return PageMsg{Req: r, Page: page, Err: err}
	}
}

func (m Model) verify() tea.Cmd {
	trail := m.svc.Audit
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		c, err := trail.Verify(ctx)
		return CheckedMsg{Check: c, Err: err}
	}
}

func (m Model) visible() int { return max(1, m.ctx.Height-5) }

func (m Model) move(to int) (Model, tea.Cmd) {
	if m.win.Loaded() == 0 {
		return m, nil
	}
	m.cursor = max(m.win.Base(), min(to, m.win.End()-1))
	m.top = frame.Window(m.top-m.win.Base(), m.cursor-m.win.Base(), m.visible(), m.win.Loaded()) + m.win.Base()
	if r, ok := m.win.Want(m.cursor, max(PageSize/2, 2*m.visible())); ok {
		return m, m.fetch(r)
	}
	return m, nil
}

// Update handles keys, pages and verifications.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case PageMsg:
		var next *int64
		if msg.Page.Next != 0 {
			n := msg.Page.Next
			next = &n
		}
		if !m.win.Apply(msg.Req, pager.Page[backend.AuditEntry, int64]{Rows: msg.Page.Entries, Next: next}, msg.Err) || msg.Err != nil {
			return m, nil
		}
		return m.move(m.cursor)
	case CheckedMsg:
		m.checking = false
		m.checkErr = msg.Err != nil
		if msg.Err == nil {
			c := msg.Check
			m.check = &c
		}
	case filterMsg:
		m.filter = msg.f
		return m.reload()
	case tea.KeyMsg:
		if m.svc.Audit == nil {
			if key.Matches(msg, m.keys.Back) {
				return m, frame.Send(frame.BackMsg{})
			}
			return m, nil
		}
		k := m.keys
		switch {
		case key.Matches(msg, k.Up):
			return m.move(m.cursor - 1)
		case key.Matches(msg, k.Down):
			return m.move(m.cursor + 1)
		case key.Matches(msg, k.PageUp):
			return m.move(m.cursor - m.visible())
		case key.Matches(msg, k.PageDown):
			return m.move(m.cursor + m.visible())
		case key.Matches(msg, k.Top):
			return m.reload()
		case key.Matches(msg, k.Clear):
			m.filter = backend.AuditFilter{}
			return m.reload()
		case key.Matches(msg, k.Verify):
			m.checking = true
			return m, m.verify()
		case key.Matches(msg, k.Back):
			return m, frame.Send(frame.BackMsg{})
		case key.Matches(msg, k.Filter):
			return m, frame.Send(form.OpenMsg{Spec: m.filterSpec()})
		}
	}
	return m, nil
}

func (m Model) filterSpec() form.Spec {
	return form.Spec{
		Title: "Filter the audit trail",
		Lines: []string{"Each set field must match exactly; leave a field empty to not filter on it."},
		Fields: []form.Field{
			{Key: "actor", Label: "actor", Value: m.filter.Actor, Hint: "e.g. alice"},
			{Key: "action", Label: "action", Value: m.filter.Action, Hint: "e.g. replay.approve, dlq.show"},
			{Key: "target", Label: "target", Value: m.filter.Target, Hint: "e.g. replay_request:7, dead_letter:42"},
		},
		Submit: func(v form.Values) tea.Cmd {
			return frame.Send(filterMsg{f: backend.AuditFilter{Actor: v["actor"], Action: v["action"], Target: v["target"]}})
		},
	}
}

// columns give AT a whole RFC 3339 UTC time, as `audit list` prints it: a
// reviewer reading a trail months later needs the year and the zone.
var columns = []frame.Column{
	{Title: "SEQ", Width: 6}, {Title: "AT", Width: 20}, {Title: "ACTOR", Width: 8, Max: 16, Flex: true},
	{Title: "ACTION", Width: 14, Max: 20, Flex: true}, {Title: "TARGET", Width: 10, Max: 24, Flex: true},
	{Title: "OUTCOME", Width: 7}, {Title: "DETAILS", Width: 0, Flex: true},
}

func describe(f backend.AuditFilter) string {
	var parts []string
	for _, p := range [][2]string{{"actor", f.Actor}, {"action", f.Action}, {"target", f.Target}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+termsafe.EscapeLine(p[1]))
		}
	}
	if len(parts) == 0 {
		return "all rows"
	}
	return strings.Join(parts, " ")
}

func (m Model) chainLine() string {
	th := m.ctx.Theme
	switch {
	case m.checking:
		return "chain: verifying…"
	case m.check == nil && m.checkErr:
		return th.Warn.Render("chain: could not verify; retrying")
	case m.check == nil:
		return "chain: not verified (v)"
	case m.check.OK:
		return th.Good.Render(fmt.Sprintf("chain: OK — %d rows verified through seq %d", m.check.Rows, m.check.Head))
	}
	return th.Warn.Render(fmt.Sprintf("chain: BROKEN at seq %d: %s", m.check.BrokenAt, termsafe.EscapeLine(m.check.Problem)))
}

// View renders the trail.
func (m Model) View() string {
	th := m.ctx.Theme
	w := m.ctx.Width
	if m.svc.Audit == nil {
		return frame.Fit("No audit trail in this build of the TUI: use `expiryctl audit list`.", w, m.ctx.Height)
	}
	t := frame.Table{Columns: columns, Theme: th}
	lines := []string{th.Title.Render("Audit trail") + " " + describe(m.filter) + ", newest first", m.chainLine(), t.Header(w)}
	for i := m.top; i < m.top+m.visible(); i++ {
		e, ok := m.win.Row(i)
		if !ok {
			break
		}
		lines = append(lines, t.Row(w, []string{strconv.FormatInt(e.Seq, 10), e.At.UTC().Format(time.RFC3339),
			termsafe.EscapeLine(e.Actor), termsafe.EscapeLine(e.Action), termsafe.EscapeLine(e.Target),
			termsafe.EscapeLine(e.Outcome), termsafe.EscapeLine(e.Details)}, i == m.cursor, false))
	}
	for len(lines) < m.visible()+3 {
		lines = append(lines, "")
	}
	detail := ""
	if e, ok := m.win.Row(m.cursor); ok {
		detail = fmt.Sprintf("#%d %s as %s (db role %s): %s", e.Seq, termsafe.EscapeLine(e.Action), termsafe.EscapeLine(e.Actor),
			termsafe.EscapeLine(e.DBRole), termsafe.EscapeLine(e.Details))
	}
	lines = append(lines, detail)
	status := ""
	switch {
	case m.win.Failed():
		status = "could not load the trail; retrying"
	case m.win.Loaded() == 0 && m.win.Loading():
		status = "loading…"
	case m.win.Loaded() == 0:
		status = "no audit rows match"
	default:
		status = fmt.Sprintf("row %d of %d", m.cursor+1, m.win.End())
		if !m.win.Complete() {
			status += "+"
		}
	}
	lines = append(lines, th.Dim.Render(status))
	return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
}
