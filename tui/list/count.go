package list

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// CountBound is how far the list counts the letters a filter matches: the
// count's cost is bounded by it, and beyond it the list says "N+".
const CountBound = 100_000

// DefaultDebounce is how long the search waits after the last key typed
// before it counts what the text matches.
const DefaultDebounce = 300 * time.Millisecond

// CountedMsg carries how many letters a filter matches: the list's filter
// (Typed false), or the text being typed into the search (Typed true). Gen
// ties it to the filter or text it was asked for.
type CountedMsg struct {
	Gen   int
	Typed bool
	Count deadletter.MatchCount
	Err   error
}

// countTickMsg is the search's debounce running out for text gen.
type countTickMsg struct{ gen int }

// WithDebounce returns the list that counts typed text d after the last
// key (0: on every key, for tests that drive the model by hand).
func (m Model) WithDebounce(d time.Duration) Model { m.debounce = d; return m }

// Total is how many letters the list's filter matches, when counted.
func (m Model) Total() (deadletter.MatchCount, bool) {
	if m.total == nil {
		return deadletter.MatchCount{}, false
	}
	return *m.total, true
}

// count counts the letters f matches, unaudited, when the archive can.
func (m Model) count(f deadletter.Filter, gen int, typed bool) tea.Cmd {
	counter, ok := m.svc.Archive.(service.LetterCounter)
	if !ok {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		n, err := counter.CountMatching(ctx, f, CountBound)
		return CountedMsg{Gen: gen, Typed: typed, Count: n, Err: err}
	}
}

// countFilter starts counting the list's filter, forgetting the old total.
func (m Model) countFilter() (Model, tea.Cmd) {
	m.countGen++
	m.total = nil
	return m, m.count(m.filter, m.countGen, false)
}

// typed schedules the count of the text in the search, debounced.
func (m Model) typed() (Model, tea.Cmd) {
	m.typedGen++
	m.typedCount = nil
	if _, ok := m.svc.Archive.(service.LetterCounter); !ok {
		return m, nil
	}
	gen := m.typedGen
	if m.debounce <= 0 {
		return m.countTyped(gen)
	}
	return m, tea.Tick(m.debounce, func(time.Time) tea.Msg { return countTickMsg{gen: gen} })
}

// countTyped counts the search's text, if it is still the text of gen.
func (m Model) countTyped(gen int) (Model, tea.Cmd) {
	if gen != m.typedGen || !m.searching {
		return m, nil
	}
	f := m.filter
	f.Search = m.searchText()
	return m, m.count(f, gen, true)
}

// counted takes a count in.
func (m Model) counted(msg CountedMsg) Model {
	switch {
	case msg.Err != nil:
	case msg.Typed && msg.Gen == m.typedGen:
		c := msg.Count
		m.typedCount = &c
	case !msg.Typed && msg.Gen == m.countGen:
		c := msg.Count
		m.total = &c
	}
	return m
}

// countText renders a count: "12 letters match", "100000+ letters match".
func countText(c deadletter.MatchCount) string {
	if c.More {
		return fmt.Sprintf("%d+ letters match", c.N)
	}
	return phrase.Count(c.N, "letter matches", "letters match")
}
