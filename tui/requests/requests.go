// Package requests is the TUI's requests screen: replay and discard
// requests with what `replay show` shows for the one opened, and the
// reviewer's actions — approve, reject (with why), cancel — and run for an
// approved request. Governance refusals come back from replay.Service and
// are shown by the root in the rule's words.
package requests

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/requestview"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// ListLimit bounds the requests listed.
const ListLimit = 200

// SampleSize is the cohort items shown with an opened request.
const SampleSize = 20

// Scope is which requests the screen lists.
type Scope int

// The scopes, in the order the scope key cycles through them.
const (
	ScopeOpen Scope = iota
	ScopePending
	ScopeAll
)

func (s Scope) String() string {
	return [...]string{"open", "pending", "all"}[s]
}

// ListedMsg carries the requests.
type ListedMsg struct {
	Scope    Scope
	Requests []replay.Request
	Err      error
}

// Outcome makes ListedMsg a frame.Outcome.
func (m ListedMsg) Outcome() error { return m.Err }

// ShownMsg carries one request with its cohort.
type ShownMsg struct {
	ID     int64
	Detail replay.Detail
	Err    error
}

// Outcome makes ShownMsg a frame.Outcome.
func (m ShownMsg) Outcome() error { return m.Err }

// KeyMap is the requests screen's keys.
type KeyMap struct {
	Up, Down, Open, Scope                key.Binding
	Approve, Reject, Cancel, Run, Back   key.Binding
	ScrollUp, ScrollDown, PageUp, PageDn key.Binding
}

// DefaultKeyMap is the requests screen's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Open:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "show")),
		Scope:      key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "open/pending/all")),
		Approve:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve")),
		Reject:     key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "reject")),
		Cancel:     key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "cancel request")),
		Run:        key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "run approved")),
		Back:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		ScrollUp:   key.NewBinding(key.WithKeys("up", "k")),
		ScrollDown: key.NewBinding(key.WithKeys("down", "j")),
		PageUp:     key.NewBinding(key.WithKeys("pgup", "b")),
		PageDn:     key.NewBinding(key.WithKeys("pgdown", "f", " ")),
	}
}

// ShortHelp is the requests screen's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Open, k.Approve, k.Reject, k.Run, k.Cancel, k.Scope}
}

// FullHelp is the requests screen's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Up, k.Down, k.Open, k.Scope, k.Back}, {k.Approve, k.Reject, k.Cancel, k.Run}}
}

// Model is the requests screen.
type Model struct {
	ctx    frame.Context
	svc    backend.Services
	keys   KeyMap
	scope  Scope
	reqs   []replay.Request
	loaded bool
	failed bool
	cursor int
	top    int
	// open is the request shown in full, 0 when the list is shown.
	open   int64
	detail *replay.Detail
	vp     viewport.Model
	// listing is true while a list call is in flight.
	listing bool
}

// New returns the requests screen over svc.
func New(ctx frame.Context, svc backend.Services) Model {
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap(), vp: viewport.New(ctx.Width, max(1, ctx.Height-1))}
}

// Keys returns the requests screen's key map.
func (m Model) Keys() KeyMap { return m.keys }

// Capturing is false: the screen has no text input.
func (m Model) Capturing() bool { return false }

// Scope is the requests listed.
func (m Model) Scope() Scope { return m.scope }

// Opened is the request shown in full, 0 when none.
func (m Model) Opened() int64 { return m.open }

// SetFrame resizes the screen.
func (m Model) SetFrame(ctx frame.Context) Model {
	m.ctx = ctx
	m.vp.Width, m.vp.Height = ctx.Width, max(1, ctx.Height-1)
	m.setContent()
	return m
}

// Visit lists the requests through the audited service, for the operator
// coming to the screen: one audit row per visit. Refresh then reloads
// through the unaudited reads.
func (m Model) Visit() (Model, tea.Cmd) {
	m.listing = true
	cmds := []tea.Cmd{m.list(true)}
	if m.open != 0 && m.detail == nil {
		cmds = append(cmds, m.show(m.open, true))
	}
	return m, tea.Batch(cmds...)
}

// Refresh reloads the list, unless a reload is in flight, and the opened
// request when its load failed, without an audit row when the services
// have unaudited reads (the tick's reloads, after a visit was audited).
func (m Model) Refresh() (Model, tea.Cmd) {
	var cmds []tea.Cmd
	if !m.listing {
		m.listing = true
		cmds = append(cmds, m.list(false))
	}
	if m.open != 0 && m.detail == nil {
		cmds = append(cmds, m.show(m.open, false))
	}
	return m, tea.Batch(cmds...)
}

// reads are the requests' reads: audited, or not when the services can.
func (m Model) reads(audited bool) service.RequestReads {
	if !audited && m.svc.RequestReads != nil {
		return m.svc.RequestReads
	}
	return m.svc.Requests
}

func (m Model) list(audited bool) tea.Cmd {
	requests, scope := m.reads(audited), m.scope
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		status := replay.Status("")
		if scope == ScopePending {
			status = replay.StatusPending
		}
		reqs, err := requests.List(ctx, status, ListLimit)
		if err != nil {
			return ListedMsg{Scope: scope, Err: err}
		}
		if scope == ScopeOpen {
			open := reqs[:0]
			for _, r := range reqs {
				if r.Open() {
					open = append(open, r)
				}
			}
			reqs = open
		}
		return ListedMsg{Scope: scope, Requests: reqs}
	}
}

func (m Model) show(id int64, audited bool) tea.Cmd {
	requests := m.reads(audited)
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		d, err := requests.Show(ctx, id, SampleSize)
		return ShownMsg{ID: id, Detail: d, Err: err}
	}
}

// selected is the request under the cursor, or the opened one.
func (m Model) selected() (replay.Request, bool) {
	if m.open != 0 {
		if m.detail != nil {
			return m.detail.Request, true
		}
		return replay.Request{}, false
	}
	if m.cursor < len(m.reqs) {
		return m.reqs[m.cursor], true
	}
	return replay.Request{}, false
}

func (m *Model) setContent() {
	if m.detail == nil {
		return
	}
	lines := strings.Split(Render(m.ctx.Theme, *m.detail), "\n")
	for i, l := range lines {
		lines[i] = linewrap.Words(l, max(10, m.ctx.Width))
	}
	m.vp.SetContent(strings.Join(lines, "\n"))
}

// Update handles keys and loaded data.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case ListedMsg:
		m.listing = false
		if msg.Scope != m.scope {
			return m, nil
		}
		if msg.Err != nil {
			m.failed = true
			return m, nil
		}
		m.reqs, m.loaded, m.failed = msg.Requests, true, false
		m.cursor = max(0, min(m.cursor, len(m.reqs)-1))
		m.top = frame.Window(m.top, m.cursor, m.visible(), len(m.reqs))
	case ShownMsg:
		if msg.ID != m.open || msg.Err != nil {
			return m, nil
		}
		d := msg.Detail
		m.detail = &d
		m.setContent()
	case action.DoneMsg:
		if msg.Err == nil && msg.Verb != "request" && msg.Verb != "discard" && m.open == msg.Request.ID {
			return m, tea.Batch(m.list(false), m.show(m.open, false))
		}
		if msg.Err == nil {
			return m, m.list(false)
		}
	case tea.KeyMsg:
		return m.updateKey(msg)
	}
	return m, nil
}

func (m Model) updateKey(k tea.KeyMsg) (Model, tea.Cmd) {
	keys := m.keys
	switch {
	case key.Matches(k, keys.Back):
		if m.open != 0 {
			m.open, m.detail = 0, nil
			return m, nil
		}
		return m, frame.Send(frame.BackMsg{})
	case key.Matches(k, keys.Approve), key.Matches(k, keys.Reject):
		if r, ok := m.selected(); ok {
			return m, action.ReviewForm(m.svc, r, key.Matches(k, keys.Approve))
		}
		return m, nil
	case key.Matches(k, keys.Cancel):
		if r, ok := m.selected(); ok {
			return m, action.CancelForm(m.svc, r)
		}
		return m, nil
	case key.Matches(k, keys.Run):
		if r, ok := m.selected(); ok {
			// A running request without a runner resumes: its approval was
			// spent when it started, and `replay run` takes it over.
			if r.Status != replay.StatusApproved && !r.RunnerGone() {
				return m, frame.Send(frame.NoticeMsg{Text: fmt.Sprintf("replay request %d is %s: only an approved request runs, or a running one whose runner is gone", r.ID, r.Status)})
			}
			return m, frame.Send(frame.RunRequestMsg{ID: r.ID})
		}
		return m, nil
	}
	if m.open != 0 {
		switch {
		case key.Matches(k, keys.ScrollUp):
			m.vp.ScrollUp(1)
		case key.Matches(k, keys.ScrollDown):
			m.vp.ScrollDown(1)
		case key.Matches(k, keys.PageUp):
			m.vp.PageUp()
		case key.Matches(k, keys.PageDn):
			m.vp.PageDown()
		}
		return m, nil
	}
	switch {
	case key.Matches(k, keys.Up):
		m.cursor = max(0, m.cursor-1)
	case key.Matches(k, keys.Down):
		m.cursor = max(0, min(len(m.reqs)-1, m.cursor+1))
	case key.Matches(k, keys.Scope):
		m.scope = (m.scope + 1) % 3
		m.reqs, m.loaded, m.cursor, m.top, m.listing = nil, false, 0, 0, true
		return m, m.list(true)
	case key.Matches(k, keys.Open):
		if r, ok := m.selected(); ok {
			m.open, m.detail = r.ID, nil
			m.vp.GotoTop()
			return m, m.show(r.ID, true)
		}
	}
	m.top = frame.Window(m.top, m.cursor, m.visible(), len(m.reqs))
	return m, nil
}

func (m Model) visible() int { return max(1, m.ctx.Height-3) }

var columns = []frame.Column{
	{Title: "ID", Width: 4}, {Title: "KIND", Width: 7}, {Title: "STATUS", Width: 9}, {Title: "ITEMS", Width: 5},
	{Title: "RATE", Width: 6}, {Title: "REQUESTED-BY", Short: "BY", Width: 8, Max: 14, Flex: true},
	{Title: "REVIEWED-BY", Short: "REVIEWER", Width: 8, Max: 14, Flex: true}, {Title: "AGE", Width: 5},
	{Title: "WHY", Width: 8, Flex: true},
}

// View renders the list or the opened request.
func (m Model) View() string {
	th := m.ctx.Theme
	w := m.ctx.Width
	if m.open != 0 {
		if m.detail == nil {
			return frame.Fit(fmt.Sprintf("loading replay request %d…", m.open), w, m.ctx.Height)
		}
		status := fmt.Sprintf("request %d · a approve · x reject · c cancel · g run · esc back", m.open)
		return frame.Fit(m.vp.View()+"\n"+th.Dim.Render(status), w, m.ctx.Height)
	}
	t := frame.Table{Columns: columns, Theme: th}
	lines := []string{th.Title.Render("Replay requests") + " " + m.scope.String() + " (s to change)", t.Header(w)}
	now := m.ctx.Now()
	for i := m.top; i < len(m.reqs) && i < m.top+m.visible(); i++ {
		r := m.reqs[i]
		lines = append(lines, t.Row(w, []string{strconv.FormatInt(r.ID, 10), string(r.Kind), statusCell(r),
			strconv.Itoa(r.Items), fmt.Sprintf("%g/s", r.Rate), termsafe.EscapeLine(r.RequestedBy),
			termsafe.EscapeLine(r.ReviewedBy), frame.Age(now, r.CreatedAt), termsafe.EscapeLine(r.Why)}, i == m.cursor, false))
	}
	for len(lines) < m.visible()+2 {
		lines = append(lines, "")
	}
	status := phrase.Count(len(m.reqs), "request", "requests")
	switch {
	case !m.loaded && m.failed:
		status = "could not load requests; retrying"
	case !m.loaded:
		status = "loading…"
	case len(m.reqs) == 0:
		status = fmt.Sprintf("no %s requests: request a replay from the letter list (r)", m.scope)
	case m.failed:
		status += " — stale: the last refresh failed"
	}
	if note := runnersGoneNote(m.reqs); note != "" && m.loaded {
		lines = append(lines, th.Dim.Render(status+" · ")+th.Warn.Render(note))
		return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
	}
	lines = append(lines, th.Dim.Render(status))
	return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
}

// Render is what `replay show` shows of a request: who asked and why, the
// cohort, rate, canary, stop conditions, flags, changes since it was frozen
// and a sample of its items. Text from people and letters is escaped.
func Render(th *frame.Theme, d replay.Detail) string {
	var b strings.Builder
	esc := termsafe.EscapeLine
	b.WriteString(requestview.Render(d, requestview.Styles{Title: th.Title.Render, Warn: th.Warn.Render},
		"approving asks you to allow it") + "\n")
	if len(d.Sample) > 0 {
		fmt.Fprintf(&b, "\n%s\n", th.Header.Render(fmt.Sprintf("Cohort (%d of %d)", len(d.Sample), d.Items)))
		for _, it := range d.Sample {
			hash := it.PayloadSHA256
			if len(hash) > 16 {
				hash = hash[:16] + "…"
			}
			fmt.Fprintf(&b, "  %3d  letter %-7d %-19s %-14s %-12s %s  %s  %s\n", it.Ordinal+1, it.DeadLetterID, it.Category,
				esc(it.ErrorClass), esc(it.ReservationID), esc(it.Target), hash, esc(it.State))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
