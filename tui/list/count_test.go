package list_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/list"
)

// TestListShowsTheKnownTotal: the status line says how many letters the
// filter matches, counted, not "100+" while only a page is loaded; and a new
// filter counts again.
func TestListShowsTheKnownTotal(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, fakes.Letters(1000))
	if v := m.View(); !strings.Contains(v, "letter 1 of 1000") || strings.Contains(v, "1000+") || strings.Contains(v, "100+") {
		t.Errorf("status with 1000 letters, a page loaded:\n%s", v)
	}
	m, _ = tuitest.Drive(t, m, update, nil, append(append(tuitest.Keys("/"), tuitest.Type("r-99")...), tuitest.Key("enter"))...)
	total, ok := m.Total()
	if !ok || total != (deadletter.MatchCount{N: 11}) || !strings.Contains(m.View(), "letter 1 of 11") {
		t.Errorf("search r-99 counts %+v (%v):\n%s", total, ok, m.View())
	}
}

// TestSearchCountsAsTyped: typing into the search shows how many letters
// the text would match, before enter.
func TestSearchCountsAsTyped(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, fakes.Letters(1000))
	m, _ = tuitest.Drive(t, m, update, nil, append(tuitest.Keys("/"), tuitest.Type("r-99")...)...)
	if v := m.View(); !strings.Contains(v, "/r-99") || !strings.Contains(v, "11 letters match") {
		t.Errorf("typing r-99 (r-99, r-990 … r-999):\n%s", v)
	}
	m, _ = tuitest.Drive(t, m, update, nil, tuitest.Type("9")...)
	if v := m.View(); !strings.Contains(v, "1 letter matches") {
		t.Errorf("typing r-999:\n%s", v)
	}
}

// TestSearchCountIsDebounced: keys typed quickly are counted once, after
// the last of them.
func TestSearchCountIsDebounced(t *testing.T) {
	t.Parallel()
	archive := fakes.Letters(1000)
	m := list.New(tuitest.Context(80, 24), tuitest.Services(archive, fakes.NewRequests("alice"))).WithDebounce(200 * time.Millisecond)
	m, first := m.Activate()
	tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(80, 24))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("letter 1 of 1000")) },
		teatest.WithDuration(5*time.Second))
	tm.Send(tuitest.Key("/"))
	for _, k := range tuitest.Type("r-99") {
		tm.Send(k)
	}
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("11 letters match")) },
		teatest.WithDuration(5*time.Second))
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	tm.FinalModel(t)
	var typed int
	for _, f := range archive.Counted {
		if f.Search != "" {
			typed++
		}
	}
	if typed != 1 {
		t.Errorf("4 keys typed at once were counted %d times, want once: %+v", typed, archive.Counted)
	}
}

// TestCohortFormSaysHowManyMatch: the form of a request by filter says how
// many letters the filter matches now.
func TestCohortFormSaysHowManyMatch(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, fakes.Letters(1000))
	m, _ = tuitest.Drive(t, m, update, nil, append(append(tuitest.Keys("/"), tuitest.Type("r-99")...), tuitest.Key("enter"))...)
	_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("R"))
	var lines []string
	for _, msg := range msgs {
		if o, ok := msg.(form.OpenMsg); ok {
			lines = o.Spec.Lines
		}
	}
	if !slices.Contains(lines, "11 letters waiting for a decision match it now; max takes the oldest") {
		t.Errorf("the cohort form's lines: %q", lines)
	}
}

// TestCohortFormCountsOnlyEligible: of 80 letters, 40 already replayed, a
// request by filter can take 40, and the form says 40, not 80.
func TestCohortFormCountsOnlyEligible(t *testing.T) {
	t.Parallel()
	var rows []deadletter.Row
	for i := range 80 {
		r := fakes.Letter(i + 1)
		if i < 40 {
			r.Status = deadletter.StatusReplayed
		}
		rows = append(rows, r)
	}
	m, _ := setup(t, fakes.NewArchive(rows...))
	_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("R"))
	var lines []string
	for _, msg := range msgs {
		if o, ok := msg.(form.OpenMsg); ok {
			lines = o.Spec.Lines
		}
	}
	if !slices.Contains(lines, "40 letters waiting for a decision match it now; max takes the oldest") {
		t.Errorf("the cohort form's lines: %q", lines)
	}
}
