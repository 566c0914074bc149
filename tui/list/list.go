// Package list is the TUI's letter list: the columns of `dlq list`, paged
// from the archive by keyset as the cursor moves (a few pages in memory,
// never the whole archive), filtered by text, queue, status and category,
// with marks for a replay or discard request of several letters.
package list

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/letterview"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/pager"
)

// PageSize is the letters fetched per page; MaxPages how many pages stay in
// memory.
const (
	PageSize = 100
	MaxPages = 4
)

// Window is the list's keyset window over the archive.
type Window = pager.Window[deadletter.Row, deadletter.Cursor]

// Request is a page the list asked for.
type Request = pager.Request[deadletter.Cursor]

// PageMsg carries one page of letters.
type PageMsg struct {
	Req  Request
	Page deadletter.Page
	Err  error
	// Keep is the letter the cursor was on when a refresh asked for the
	// page, to stay on once the page replaces the rows.
	Keep int64
}

// Outcome makes PageMsg a frame.Outcome.
func (m PageMsg) Outcome() error { return m.Err }

// KeyMap is the list's keys.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Open, Mark, Search, Status, Queue       key.Binding
	Order, Clear, Reload                    key.Binding
	Replay, ReplayFilter                    key.Binding
	Discard, DiscardFilter, Back            key.Binding
}

// DefaultKeyMap is the list's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:            key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:          key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:        key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown:      key.NewBinding(key.WithKeys("pgdown", "f"), key.WithHelp("pgdn", "page down")),
		Top:           key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:        key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "last loaded")),
		Open:          key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "show")),
		Mark:          key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "mark")),
		Search:        key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "search")),
		Status:        key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "status filter")),
		Queue:         key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "queue filter")),
		Order:         key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "newest/oldest")),
		Clear:         key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "clear filters")),
		Reload:        key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "reload")),
		Replay:        key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "request replay")),
		ReplayFilter:  key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "replay filter")),
		Discard:       key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "request discard")),
		DiscardFilter: key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "discard filter")),
		Back:          key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "unmark/back")),
	}
}

// ShortHelp is the list's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Open, k.Mark, k.Replay, k.Search, k.Reload, k.Status, k.Queue}
}

// FullHelp is the list's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom},
		{k.Open, k.Mark, k.Search, k.Status, k.Queue, k.Order, k.Clear, k.Reload},
		{k.Replay, k.ReplayFilter, k.Discard, k.DiscardFilter, k.Back},
	}
}

// Model is the letter list.
type Model struct {
	ctx    frame.Context
	svc    backend.Services
	keys   KeyMap
	filter deadletter.Filter
	oldest bool
	win    *Window
	cursor int
	top    int
	marks  []int64
	queues []string

	search    textinput.Model
	searching bool

	// total is how many letters the filter matches (countGen its count),
	// typedCount how many the text being typed would (typedGen), counted
	// debounce after the last key; nil while not counted.
	total, typedCount  *deadletter.MatchCount
	countGen, typedGen int
	debounce           time.Duration
}

// New returns an empty list over svc; it loads when first shown.
func New(ctx frame.Context, svc backend.Services) Model {
	in := textinput.New()
	in.Prompt = "/"
	in.CharLimit = 200
	in.Cursor.SetMode(cursor.CursorStatic)
	in.Cursor.Style = ctx.Theme.Selected
	in.Cursor.TextStyle = ctx.Theme.Renderer.NewStyle()
	in.TextStyle = ctx.Theme.Renderer.NewStyle()
	in.PromptStyle = ctx.Theme.Key
	in.PlaceholderStyle = ctx.Theme.Dim
	in.Placeholder = "reservation, message id, idempotency key, error class or text"
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap(), win: pager.New[deadletter.Row, deadletter.Cursor](PageSize, MaxPages), search: in}
}

// Keys returns the list's key map.
func (m Model) Keys() KeyMap { return m.keys }

// SetFrame resizes the list.
func (m Model) SetFrame(ctx frame.Context) Model {
	m.ctx = ctx
	m.search.Width = max(10, ctx.Width-4)
	m.top = frame.Window(m.top-m.win.Base(), m.cursor-m.win.Base(), m.visible(), m.win.Loaded()) + m.win.Base()
	return m
}

// Capturing reports whether the search input has the keys.
func (m Model) Capturing() bool { return m.searching }

// Filter is the filter the list shows.
func (m Model) Filter() deadletter.Filter { return m.filter }

// Oldest reports whether the list is oldest first.
func (m Model) Oldest() bool { return m.oldest }

// Cursor is the absolute index of the selected letter.
func (m Model) Cursor() int { return m.cursor }

// Window exposes the keyset window, for tests and the benchmark.
func (m Model) Window() *Window { return m.win }

// Marked returns the marked letter ids in the order they were marked.
func (m Model) Marked() []int64 { return slices.Clone(m.marks) }

// Selected returns the letter under the cursor.
func (m Model) Selected() (deadletter.Row, bool) { return m.win.Row(m.cursor) }

// SetQueues tells the list which dead-letter queues exist, for the queue
// filter.
func (m Model) SetQueues(qs []string) Model {
	for _, q := range qs {
		if !slices.Contains(m.queues, q) {
			m.queues = append(m.queues, q)
		}
	}
	slices.Sort(m.queues)
	return m
}

// Activate loads the first page the first time the list is shown.
func (m Model) Activate() (Model, tea.Cmd) {
	if m.win.Started() {
		return m, nil
	}
	return m.reload()
}

// Show replaces the filter (from the summary) and reloads.
func (m Model) Show(f deadletter.Filter) (Model, tea.Cmd) {
	m.filter = f
	m.search.SetValue(f.Search)
	return m.reload()
}

// Refresh retries a failed fetch, or, at the head of the list, fetches the
// first page again and recounts, so that letters captured since show up
// as the summary's do; the cursor stays on its letter. Scrolled past the
// first page the rows are left alone, not moved under the reader: ctrl+r
// reloads.
func (m Model) Refresh() tea.Cmd {
	if r, ok := m.win.Retry(); ok {
		return m.fetch(r)
	}
	if m.searching || m.cursor >= PageSize/2 {
		return nil
	}
	r, ok := m.win.Head()
	if !ok {
		return nil
	}
	fetch := m.fetch(r)
	if sel, ok := m.Selected(); ok {
		inner := fetch
		fetch = func() tea.Msg {
			msg := inner().(PageMsg)
			msg.Keep = sel.ID
			return msg
		}
	}
	// The old total stands until the new one arrives, under the same gen.
	return tea.Batch(fetch, m.count(m.filter, m.countGen, false))
}

func (m Model) reload() (Model, tea.Cmd) {
	m.cursor, m.top = 0, 0
	fetch := m.fetch(m.win.Reset())
	m, count := m.countFilter()
	return m, tea.Batch(fetch, count)
}

func (m Model) fetch(r Request) tea.Cmd {
	archive, f, oldest := m.svc.Archive, m.filter, m.oldest
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		var page deadletter.Page
		var err error
		if ol, ok := archive.(service.OldestLister); ok && oldest {
			page, err = ol.ListOldest(ctx, f, r.After, PageSize)
		} else {
			page, err = archive.List(ctx, f, r.After, PageSize)
		}
		return PageMsg{Req: r, Page: page, Err: err}
	}
}

// visible is the number of letter rows on screen.
func (m Model) visible() int { return max(1, m.ctx.Height-3) }

// margin is how close to the end of what is loaded the cursor may come
// before the next page is fetched: two screens, so that paging down never
// waits on a fast database.
func (m Model) margin() int { return max(PageSize/2, 2*m.visible()) }

// move puts the cursor at absolute index to (clamped to what is loaded) and
// fetches a page when it nears either end.
func (m Model) move(to int) (Model, tea.Cmd) {
	if m.win.Loaded() == 0 {
		return m, nil
	}
	m.cursor = max(m.win.Base(), min(to, m.win.End()-1))
	m.top = frame.Window(m.top-m.win.Base(), m.cursor-m.win.Base(), m.visible(), m.win.Loaded()) + m.win.Base()
	if r, ok := m.win.Want(m.cursor, m.margin()); ok {
		return m, m.fetch(r)
	}
	return m, nil
}

func (m Model) selection() action.Selection {
	if len(m.marks) > 0 {
		return action.Selection{IDs: slices.Clone(m.marks)}
	}
	if r, ok := m.Selected(); ok {
		return action.Selection{IDs: []int64{r.ID}}
	}
	return action.Selection{}
}

// Update handles keys and pages.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case PageMsg:
		if !m.win.Apply(msg.Req, pager.Page[deadletter.Row, deadletter.Cursor]{Rows: msg.Page.Rows, Next: msg.Page.Next}, msg.Err) {
			return m, nil
		}
		if msg.Err != nil {
			return m, nil
		}
		for _, r := range msg.Page.Rows {
			if r.SourceQueue != "" && !slices.Contains(m.queues, r.SourceQueue) {
				m.queues = append(m.queues, r.SourceQueue)
				slices.Sort(m.queues)
			}
		}
		if msg.Keep != 0 {
			if i := slices.IndexFunc(msg.Page.Rows, func(r deadletter.Row) bool { return r.ID == msg.Keep }); i >= 0 {
				m.cursor = i
			}
		}
		return m.move(m.cursor)
	case action.DoneMsg:
		if msg.Err == nil && len(msg.Letters) > 0 && (msg.Verb == "request" || msg.Verb == "discard") {
			req := msg.Request.ID
			m.win.Update(func(r *deadletter.Row) {
				if slices.Contains(msg.Letters, r.ID) {
					r.Status = deadletter.StatusInRequest
					r.ReplayRequestID = &req
				}
			})
			m.marks = slices.DeleteFunc(m.marks, func(id int64) bool { return slices.Contains(msg.Letters, id) })
		}
		return m, nil
	case CountedMsg:
		return m.counted(msg), nil
	case countTickMsg:
		return m.countTyped(msg.gen)
	case tea.KeyMsg:
		if m.searching {
			return m.updateSearch(msg)
		}
		return m.updateKey(msg)
	}
	return m, nil
}

// searchText is the text typed into the search, trimmed.
func (m Model) searchText() string { return strings.TrimSpace(m.search.Value()) }

func (m Model) updateSearch(k tea.KeyMsg) (Model, tea.Cmd) {
	switch k.String() {
	case "enter":
		m.searching = false
		m.search.Blur()
		m.filter.Search = m.searchText()
		return m.reload()
	case "esc":
		m.searching = false
		m.search.Blur()
		m.search.SetValue(m.filter.Search)
		return m, nil
	}
	before := m.searchText()
	var cmd tea.Cmd
	m.search, cmd = m.search.Update(k)
	if m.searchText() == before {
		return m, cmd
	}
	var count tea.Cmd
	m, count = m.typed()
	return m, tea.Batch(cmd, count)
}

func (m Model) updateKey(k tea.KeyMsg) (Model, tea.Cmd) {
	keys := m.keys
	switch {
	case key.Matches(k, keys.Up):
		return m.move(m.cursor - 1)
	case key.Matches(k, keys.Down):
		return m.move(m.cursor + 1)
	case key.Matches(k, keys.PageUp):
		return m.move(m.cursor - m.visible())
	case key.Matches(k, keys.PageDown):
		return m.move(m.cursor + m.visible())
	case key.Matches(k, keys.Top):
		if m.win.Base() > 0 {
			return m.reload()
		}
		return m.move(0)
	case key.Matches(k, keys.Bottom):
		return m.move(m.win.End() - 1)
	case key.Matches(k, keys.Open):
		if r, ok := m.Selected(); ok {
			return m, frame.Send(frame.ShowLetterMsg{ID: r.ID})
		}
	case key.Matches(k, keys.Mark):
		if r, ok := m.Selected(); ok {
			if i := slices.Index(m.marks, r.ID); i >= 0 {
				m.marks = slices.Delete(m.marks, i, i+1)
			} else {
				m.marks = append(m.marks, r.ID)
			}
			return m.move(m.cursor + 1)
		}
	case key.Matches(k, keys.Search):
		m.searching = true
		m.search.SetValue(m.filter.Search)
		m.search.CursorEnd()
		m.typedGen++
		m.typedCount = m.total
		return m, m.search.Focus()
	case key.Matches(k, keys.Status):
		m.filter.Status = nextStatus(m.filter.Status)
		return m.reload()
	case key.Matches(k, keys.Queue):
		m.filter.Queue = nextOf(m.queues, m.filter.Queue)
		return m.reload()
	case key.Matches(k, keys.Order):
		if _, ok := m.svc.Archive.(service.OldestLister); !ok {
			return m, frame.Send(frame.NoticeMsg{Text: "oldest first needs the archive to list in ascending order (Archive.ListOldest); this build lists newest first"})
		}
		m.oldest = !m.oldest
		return m.reload()
	case key.Matches(k, keys.Clear):
		m.filter = deadletter.Filter{}
		m.search.SetValue("")
		return m.reload()
	case key.Matches(k, keys.Reload):
		return m.reload()
	case key.Matches(k, keys.Replay), key.Matches(k, keys.Discard):
		sel := m.selection()
		if len(sel.IDs) == 0 {
			return m, nil
		}
		kind := replay.KindReplay
		if key.Matches(k, keys.Discard) {
			kind = replay.KindDiscard
		}
		return m, action.RequestForm(m.svc, kind, sel)
	case key.Matches(k, keys.ReplayFilter), key.Matches(k, keys.DiscardFilter):
		kind := replay.KindReplay
		if key.Matches(k, keys.DiscardFilter) {
			kind = replay.KindDiscard
		}
		return m, action.RequestForm(m.svc, kind, action.Selection{Filter: m.filter})
	case key.Matches(k, keys.Back):
		if len(m.marks) > 0 {
			m.marks = nil
			return m, nil
		}
		return m, frame.Send(frame.BackMsg{})
	}
	return m, nil
}

func nextStatus(s deadletter.Status) deadletter.Status {
	all := deadletter.Statuses()
	if s == "" {
		return all[0]
	}
	i := slices.Index(all, s)
	if i < 0 || i == len(all)-1 {
		return ""
	}
	return all[i+1]
}

func nextOf(values []string, cur string) string {
	if len(values) == 0 {
		return ""
	}
	if cur == "" {
		return values[0]
	}
	i := slices.Index(values, cur)
	if i < 0 || i == len(values)-1 {
		return ""
	}
	return values[i+1]
}

// Columns are the list's columns: those of `dlq list`.
var Columns = []frame.Column{
	{Title: "ID", Width: 7},
	{Title: "DEAD-LETTERED", Short: "AGE", Width: 6, Max: 13, Flex: true, Grow: 2},
	{Title: "CATEGORY", Width: 12, Max: 19, Flex: true},
	{Title: "ERROR-CLASS", Short: "ERROR", Width: 10, Max: 16, Flex: true},
	{Title: "RESERVATION", Short: "RESERV.", Width: 9, Max: 16, Flex: true},
	{Title: "ATTEMPTS", Short: "ATT", Width: 3, Max: 8, Flex: true, Grow: 2},
	{Title: "STATUS", Width: 10},
	{Title: "QUEUE", Width: 6, Max: 26, Flex: true, Grow: 1},
}

// Cells are the escaped cells of one letter.
func Cells(r deadletter.Row, now func() string, systems deadletter.Systems) []string {
	return []string{strconv.FormatInt(r.ID, 10), now(), string(r.Category), termsafe.EscapeLine(r.ErrorClass),
		termsafe.EscapeLine(r.ReservationID), strconv.Itoa(r.Attempts), string(r.Status), letterview.QueueLabel(r.SourceQueue, systems)}
}

// View renders the list.
func (m Model) View() string {
	th := m.ctx.Theme
	w := m.ctx.Width
	t := frame.Table{Columns: Columns, Theme: th}
	var lines []string

	order := "newest first"
	if m.oldest {
		order = "oldest first"
	}
	head := th.Title.Render("Letters") + " " + action.DescribeFilter(m.filter) + ", " + order
	if len(m.marks) > 0 {
		head += fmt.Sprintf(" · %d marked", len(m.marks))
	}
	if m.searching {
		line := m.search.View()
		if m.typedCount != nil {
			line = frame.Pad(line, max(0, w-24)) + th.Dim.Render(countText(*m.typedCount))
		}
		lines = append(lines, line)
	} else {
		lines = append(lines, head)
	}
	lines = append(lines, t.Header(w))

	now := m.ctx.Now()
	vis := m.visible()
	for i := m.top; i < m.top+vis; i++ {
		r, ok := m.win.Row(i)
		if !ok {
			break
		}
		age := func() string { return frame.Age(now, r.DeadLetteredAt) }
		lines = append(lines, t.Row(w, Cells(r, age, m.ctx.Systems), i == m.cursor, slices.Contains(m.marks, r.ID)))
	}
	for len(lines) < vis+2 {
		lines = append(lines, "")
	}
	lines = append(lines, th.Dim.Render(m.status()))
	return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
}

func (m Model) status() string {
	switch {
	case !m.win.Started():
		return ""
	case m.win.Failed():
		return "could not load letters; retrying"
	case m.win.Loaded() == 0 && m.win.Loading():
		return "loading…"
	case m.win.Loaded() == 0:
		return "no dead letters match"
	}
	var s string
	switch t := m.total; {
	case t != nil && !t.More:
		s = fmt.Sprintf("letter %d of %d", m.cursor+1, t.N)
	case t != nil:
		s = fmt.Sprintf("letter %d of %d+", m.cursor+1, max(t.N, m.win.End()))
	default:
		s = fmt.Sprintf("letter %d of %d", m.cursor+1, m.win.End())
		if !m.win.Complete() {
			s += "+"
		}
	}
	if m.win.Loading() {
		s += " · loading more…"
	}
	return s
}
