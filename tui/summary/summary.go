// Package summary is the TUI's first screen: the incident signals (arrival
// rate and trend, overdue holds, the live queues' states), the last hour's
// arrivals per minute by category, dead letters per reason category
// (waiting, total, oldest, queues) and the open replay requests by status,
// reloaded on every refresh tick while it is shown.
package summary

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// requestSample bounds the requests read to count the open ones.
const requestSample = 500

// LoadedMsg carries a fresh summary: the incident signals, which carry the
// categories.
type LoadedMsg struct {
	Signals deadletter.Signals
	At      time.Time
	Err     error
}

// Outcome makes LoadedMsg a frame.Outcome.
func (m LoadedMsg) Outcome() error { return m.Err }

// Queues returns the dead-letter queues the summary names, sorted.
func (m LoadedMsg) Queues() []string {
	var qs []string
	for _, c := range m.Signals.Categories {
		for _, q := range c.Queues {
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
		}
	}
	slices.Sort(qs)
	return qs
}

// MinutesMsg carries the last hour's arrivals per minute.
type MinutesMsg struct {
	Minutes deadletter.MinuteArrivals
	Err     error
}

// Outcome makes MinutesMsg a frame.Outcome.
func (m MinutesMsg) Outcome() error { return m.Err }

// QueuesMsg carries the live queues' states. It is not a frame.Outcome: an
// unreachable broker is not a database outage, and the summary says so in
// place.
type QueuesMsg struct {
	Report deadletter.QueueReport
	Err    error
}

// HoldsMsg carries the holds past their deadline in the reservation
// database.
type HoldsMsg struct {
	Gap replay.HoldsGap
	Err error
}

// CountsMsg carries the open requests by status.
type CountsMsg struct {
	Counts map[replay.Status]int
	// RunnersGone counts the running requests that no runner holds.
	RunnersGone int
	// Capped is true when more requests exist than were read.
	Capped bool
	Err    error
}

// Outcome makes CountsMsg a frame.Outcome.
func (m CountsMsg) Outcome() error { return m.Err }

// KeyMap is the summary's keys.
type KeyMap struct {
	Up, Down, Open, All key.Binding
}

// DefaultKeyMap is the summary's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:   key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down: key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Open: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "list letters")),
		All:  key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "all letters")),
	}
}

// ShortHelp is the summary's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding { return []key.Binding{k.Open, k.All} }

// FullHelp is the summary's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{{k.Up, k.Down, k.Open, k.All}} }

// Model is the summary screen.
type Model struct {
	ctx     frame.Context
	svc     backend.Services
	keys    KeyMap
	cats    []deadletter.CategorySummary
	counts  map[replay.Status]int
	gone    int
	capped  bool
	loaded  bool
	at      time.Time
	cursor  int
	failed  bool
	refresh time.Duration
	// signals, minutes and queues are the incident part; the signals
	// come with the categories (loaded), and each loaded flag stays set
	// once a read succeeded, so a failed refresh keeps the last values on
	// screen.
	signals       deadletter.Signals
	minutes       deadletter.MinuteArrivals
	minutesLoaded bool
	queues        deadletter.QueueReport
	queuesErr     error
	queuesLoaded  bool
	// holds are the reservation database's holds past their deadline,
	// holdsErr why they could not be read (replay.ErrNoGapQuery: the
	// policy sets no gap query).
	holds       replay.HoldsGap
	holdsErr    error
	holdsLoaded bool
	// pending counts the loads in flight: a tick does not start more while
	// a slow or unreachable database still holds the last ones.
	pending int
}

// New returns the summary screen over svc; refresh is the reload interval
// it mentions (0: none).
func New(ctx frame.Context, svc backend.Services, refresh time.Duration) Model {
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap(), refresh: refresh}
}

// Keys returns the summary's key map.
func (m Model) Keys() KeyMap { return m.keys }

// SetFrame resizes the screen.
func (m Model) SetFrame(ctx frame.Context) Model { m.ctx = ctx; return m }

// Capturing is false: the summary has no text input.
func (m Model) Capturing() bool { return false }

// Refresh reloads the categories and the request counts, unless the last
// reload is still in flight.
func (m Model) Refresh() (Model, tea.Cmd) {
	if m.pending > 0 {
		return m, nil
	}
	archive, requests, now := m.svc.Archive, m.svc.Requests, m.ctx.Now
	cmds := []tea.Cmd{
		func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			// The signals carry the categories too, read in the same
			// snapshot: one read of the archive, as `dlq summary` makes.
			s, err := archive.Signals(ctx, deadletter.SignalsOptions{})
			return LoadedMsg{Signals: s, At: now(), Err: err}
		},
		func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			if counter, ok := requests.(service.OpenCounter); ok {
				counts, err := counter.CountOpen(ctx)
				gone := 0
				if goneCounter, ok := requests.(service.RunnerGoneCounter); ok && err == nil && counts[replay.StatusRunning] > 0 {
					gone, err = goneCounter.CountRunnersGone(ctx)
				}
				return CountsMsg{Counts: counts, RunnersGone: gone, Err: err}
			}
			reqs, err := requests.List(ctx, "", requestSample)
			if err != nil {
				return CountsMsg{Err: err}
			}
			counts, gone := map[replay.Status]int{}, 0
			for _, r := range reqs {
				if r.Open() {
					counts[r.Status]++
				}
				if r.RunnerGone() {
					gone++
				}
			}
			return CountsMsg{Counts: counts, RunnersGone: gone, Capped: len(reqs) == requestSample}
		},
	}
	if minuter, ok := archive.(service.ArrivalMinuter); ok {
		cmds = append(cmds, func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			mins, err := minuter.ArrivalMinutes(ctx)
			return MinutesMsg{Minutes: mins, Err: err}
		})
	}
	if queues, work := m.svc.LiveQueues, m.svc.WorkQueue; queues != nil {
		cmds = append(cmds, func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			r, err := queues.Topology(ctx, work)
			return QueuesMsg{Report: r, Err: err}
		})
	}
	if holds := m.svc.HoldsGap; holds != nil {
		cmds = append(cmds, func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			g, err := holds(ctx)
			return HoldsMsg{Gap: g, Err: err}
		})
	}
	m.pending = len(cmds)
	return m, tea.Batch(cmds...)
}

// Selected is the category under the cursor; "" is the "all" line.
func (m Model) Selected() deadletter.Category {
	if m.cursor == 0 || m.cursor > len(m.cats) {
		return ""
	}
	return m.cats[m.cursor-1].Category
}

// Update handles keys and loaded data.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		m.pending = max(0, m.pending-1)
		if msg.Err != nil {
			m.failed = true
			return m, nil
		}
		m.failed = false
		m.signals, m.at, m.loaded = msg.Signals, msg.At, true
		m.cats = make([]deadletter.CategorySummary, len(msg.Signals.Categories))
		for i, c := range msg.Signals.Categories {
			m.cats[i] = c.CategorySummary
		}
		m.cursor = min(m.cursor, len(m.cats))
	case MinutesMsg:
		m.pending = max(0, m.pending-1)
		if msg.Err == nil {
			m.minutes, m.minutesLoaded = msg.Minutes, true
		}
	case QueuesMsg:
		m.pending = max(0, m.pending-1)
		m.queues, m.queuesErr, m.queuesLoaded = msg.Report, msg.Err, true
	case HoldsMsg:
		m.pending = max(0, m.pending-1)
		m.holds, m.holdsErr, m.holdsLoaded = msg.Gap, msg.Err, true
	case CountsMsg:
		m.pending = max(0, m.pending-1)
		if msg.Err == nil {
			m.counts, m.gone, m.capped = msg.Counts, msg.RunnersGone, msg.Capped
		}
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, m.keys.Up):
			m.cursor = max(0, m.cursor-1)
		case key.Matches(msg, m.keys.Down):
			m.cursor = min(len(m.cats), m.cursor+1)
		case key.Matches(msg, m.keys.All):
			return m, frame.Send(frame.ShowLettersMsg{})
		case key.Matches(msg, m.keys.Open):
			f := deadletter.Filter{}
			if c := m.Selected(); c != "" {
				f.Categories = []deadletter.Category{c}
			}
			return m, frame.Send(frame.ShowLettersMsg{Filter: f})
		}
	}
	return m, nil
}

var table = []frame.Column{
	{Title: "CATEGORY", Width: 19}, {Title: "WAITING", Width: 8}, {Title: "TOTAL", Width: 8},
	{Title: "OLDEST", Width: 7}, {Title: "QUEUES", Width: 10, Flex: true},
}

// View renders the screen.
func (m Model) View() string {
	th := m.ctx.Theme
	t := frame.Table{Columns: table, Theme: th}
	w := m.ctx.Width
	lines := []string{th.Title.Render("Now")}
	lines = append(lines, m.signalLines()...)
	lines = append(lines, m.queueLines()...)
	if spark := m.sparkLines(w); len(spark) > 0 {
		lines = append(lines, "")
		lines = append(lines, spark...)
	}
	lines = append(lines, "", th.Title.Render("Dead letters by reason"))
	if !m.loaded {
		lines = append(lines, "", "loading…")
		return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
	}
	lines = append(lines, t.Header(w))
	var waiting, total int64
	var oldest *time.Time
	now := m.ctx.Now()
	for _, c := range m.cats {
		waiting += c.Count
		total += c.Total
		if c.OldestDeadLetteredAt != nil && (oldest == nil || c.OldestDeadLetteredAt.Before(*oldest)) {
			oldest = c.OldestDeadLetteredAt
		}
	}
	age := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return frame.Age(now, *t)
	}
	lines = append(lines, t.Row(w, []string{"(all)", strconv.FormatInt(waiting, 10), strconv.FormatInt(total, 10), age(oldest), ""}, m.cursor == 0, false))
	for i, c := range m.cats {
		queues := make([]string, len(c.Queues))
		for j, q := range c.Queues {
			queues[j] = termsafe.EscapeLine(q)
		}
		lines = append(lines, t.Row(w, []string{string(c.Category), strconv.FormatInt(c.Count, 10),
			strconv.FormatInt(c.Total, 10), age(c.OldestDeadLetteredAt), strings.Join(queues, ",")}, m.cursor == i+1, false))
	}
	if len(m.cats) == 0 {
		lines = append(lines, "  the archive is empty: capture a queue with `expiryctl dlq ingest --queue QUEUE`")
	}
	lines = append(lines, "", th.Title.Render("Open replay requests"))
	var parts []string
	for _, s := range []replay.Status{replay.StatusPending, replay.StatusApproved, replay.StatusRunning, replay.StatusHalted} {
		part := fmt.Sprintf("%s %d", s, m.counts[s])
		if s == replay.StatusRunning && m.gone > 0 {
			// Nothing publishes these: "running" alone reads as progress.
			part += fmt.Sprintf(" (%d with no runner)", m.gone)
		}
		parts = append(parts, part)
	}
	more := ""
	if m.capped {
		more = fmt.Sprintf(" (counted among the newest %d requests)", requestSample)
	}
	lines = append(lines, "  "+strings.Join(parts, " · ")+more)
	status := "updated " + m.at.UTC().Format("15:04:05Z")
	if m.refresh > 0 {
		status += ", every " + phrase.Duration(m.refresh)
	}
	if m.failed {
		status += " — stale: the last refresh failed"
	}
	lines = append(lines, "", th.Dim.Render(status))
	return frame.Fit(strings.Join(lines, "\n"), w, m.ctx.Height)
}
