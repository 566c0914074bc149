package list_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/list"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m list.Model, msg tea.Msg) (list.Model, tea.Cmd) { return m.Update(msg) }

// setup returns a 80×24 list over archive, shown with its first page.
func setup(t *testing.T, archive service.Archive) (list.Model, *fakes.Requests) {
	t.Helper()
	reqs := fakes.NewRequests("alice")
	m := list.New(tuitest.Context(80, 21), tuitest.Services(archive, reqs))
	m, first := m.Activate()
	m, _ = tuitest.Drive(t, m, update, first)
	return m, reqs
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		keys       []tea.Msg
		wantCursor int
		wantID     int64
		wantFilter deadletter.Filter
		wantMarks  []int64
		wantPages  int
	}{
		{name: "start", wantCursor: 0, wantID: 1000, wantPages: 1},
		{name: "down twice", keys: tuitest.Keys("down", "j"), wantCursor: 2, wantID: 998, wantPages: 1},
		{name: "up at top stays", keys: tuitest.Keys("up"), wantCursor: 0, wantID: 1000, wantPages: 1},
		{name: "page down", keys: tuitest.Keys("pgdown"), wantCursor: 18, wantID: 982, wantPages: 1},
		{name: "page down near the end of the page fetches the next", keys: tuitest.Keys("pgdown", "pgdown", "pgdown"), wantCursor: 54, wantID: 946, wantPages: 2},
		{name: "deep paging keeps at most four pages", keys: repeat("pgdown", 40), wantCursor: 720, wantID: 280, wantPages: 4},
		{name: "top after deep paging starts over", keys: append(repeat("pgdown", 40), tuitest.Key("g")), wantCursor: 0, wantID: 1000, wantPages: 1},
		{name: "status filter", keys: tuitest.Keys("s"), wantCursor: 0, wantID: 1000, wantFilter: deadletter.Filter{Status: deadletter.StatusDead}, wantPages: 1},
		{name: "status filter cycles back", keys: tuitest.Keys("s", "s", "s", "s", "s"), wantCursor: 0, wantID: 1000, wantPages: 1},
		{name: "queue filter", keys: tuitest.Keys("w"), wantCursor: 0, wantID: 999, wantFilter: deadletter.Filter{Queue: "reservation-expiry-eu.dlq"}, wantPages: 1},
		{name: "search", keys: append(append(tuitest.Keys("/"), tuitest.Type("r-77")...), tuitest.Key("enter")), wantID: 779, wantFilter: deadletter.Filter{Search: "r-77"}, wantPages: 1},
		{name: "search cancelled", keys: append(append(tuitest.Keys("/"), tuitest.Type("r-77")...), tuitest.Key("esc")), wantID: 1000, wantPages: 1},
		{name: "mark two", keys: tuitest.Keys(" ", " "), wantCursor: 2, wantID: 998, wantMarks: []int64{1000, 999}, wantPages: 1},
		{name: "unmark", keys: tuitest.Keys(" ", "up", " "), wantCursor: 1, wantID: 999, wantMarks: nil, wantPages: 1},
		{name: "esc clears marks", keys: tuitest.Keys(" ", " ", "esc"), wantCursor: 2, wantID: 998, wantMarks: nil, wantPages: 1},
		{name: "clear filters", keys: tuitest.Keys("s", "w", "x"), wantID: 1000, wantPages: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := setup(t, fakes.Letters(1000))
			m = m.SetQueues([]string{"reservation-expiry-eu.dlq", "reservation-expiry.dlq"})
			m = press(t, m, tt.keys...)
			if m.Cursor() != tt.wantCursor && tt.name != "search" && tt.name != "search cancelled" {
				t.Errorf("cursor = %d, want %d", m.Cursor(), tt.wantCursor)
			}
			if r, ok := m.Selected(); !ok || r.ID != tt.wantID {
				t.Errorf("selected = %d (%v), want %d", r.ID, ok, tt.wantID)
			}
			if got := m.Filter(); !equalFilter(got, tt.wantFilter) {
				t.Errorf("filter = %+v, want %+v", got, tt.wantFilter)
			}
			if got := m.Marked(); !slices.Equal(got, tt.wantMarks) {
				t.Errorf("marks = %v, want %v", got, tt.wantMarks)
			}
			if got := m.Window().Pages(); got != tt.wantPages {
				t.Errorf("pages in memory = %d, want %d", got, tt.wantPages)
			}
			tuitest.AssertFits(t, m.View(), 80, 21)
		})
	}
}

// press sends keys one at a time, each with the fetches it causes, as a
// person typing at the speed of a fast database would.
func press(t *testing.T, m list.Model, keys ...tea.Msg) list.Model {
	t.Helper()
	for _, k := range keys {
		m, _ = tuitest.Drive(t, m, update, nil, k)
	}
	return m
}

func repeat(k string, n int) []tea.Msg {
	out := make([]tea.Msg, n)
	for i := range out {
		out[i] = tuitest.Key(k)
	}
	return out
}

func equalFilter(a, b deadletter.Filter) bool {
	return slices.Equal(a.Categories, b.Categories) && a.Queue == b.Queue && a.Status == b.Status && a.Search == b.Search
}

func TestActionsOpenForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		keys      []tea.Msg
		wantTitle string
		wantIDs   []int64
	}{
		{name: "replay selected", keys: tuitest.Keys("r"), wantTitle: "Request a replay of dead letter 50", wantIDs: []int64{50}},
		{name: "replay marked", keys: tuitest.Keys(" ", "down", " ", "r"), wantTitle: "Request a replay of 2 marked letters", wantIDs: []int64{50, 48}},
		{name: "replay filter", keys: tuitest.Keys("s", "R"), wantTitle: "Request a replay of letters matching status=dead (oldest first)"},
		{name: "discard selected", keys: tuitest.Keys("d"), wantTitle: "Request a discard of dead letter 50", wantIDs: []int64{50}},
		{name: "discard filter", keys: tuitest.Keys("D"), wantTitle: "Request a discard of letters matching all letters (oldest first)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, reqs := setup(t, fakes.Letters(50))
			m = press(t, m, tt.keys[:len(tt.keys)-1]...)
			_, msgs := tuitest.Drive(t, m, update, nil, tt.keys[len(tt.keys)-1])
			var open *form.OpenMsg
			for _, msg := range msgs {
				if o, ok := msg.(form.OpenMsg); ok {
					open = &o
				}
			}
			if open == nil {
				t.Fatalf("no form opened; messages %v", msgs)
			}
			if open.Spec.Title != tt.wantTitle {
				t.Errorf("title = %q, want %q", open.Spec.Title, tt.wantTitle)
			}
			// Fill and submit the form as a user would.
			values := form.Values{"why": "INC-1", "max": "5"}
			msg := open.Spec.Submit(values)()
			done, ok := msg.(action.DoneMsg)
			if !ok || done.Err != nil {
				t.Fatalf("submit gave %#v", msg)
			}
			if len(reqs.Created) != 1 || !slices.Equal(reqs.Created[0].Selection.IDs, tt.wantIDs) {
				t.Fatalf("created %+v, want ids %v", reqs.Created, tt.wantIDs)
			}
			if tt.wantIDs == nil && reqs.Created[0].Selection.Max != 5 {
				t.Errorf("filter request max = %d, want 5", reqs.Created[0].Selection.Max)
			}
		})
	}
}

func TestDoneMarksLettersInRequest(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, fakes.Letters(50))
	m = press(t, m, tuitest.Keys(" ", " ")...)
	m, _ = tuitest.Drive(t, m, update, nil, action.DoneMsg{Verb: "request", Letters: []int64{50, 49}, Request: replay.Request{ID: 7}})
	if len(m.Marked()) != 0 {
		t.Errorf("marks %v left after the request", m.Marked())
	}
	r, _ := m.Window().Row(0)
	if r.Status != deadletter.StatusInRequest || r.ReplayRequestID == nil || *r.ReplayRequestID != 7 {
		t.Errorf("letter 50 = %s in %v, want in_request in 7", r.Status, r.ReplayRequestID)
	}
}

func TestOrder(t *testing.T) {
	t.Parallel()
	t.Run("newest only without ListOldest", func(t *testing.T) {
		m, _ := setup(t, fakes.Letters(10))
		m, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("o"))
		if m.Oldest() || len(msgs) != 2 {
			t.Fatalf("o toggled to oldest=%v with messages %v; want a notice", m.Oldest(), msgs)
		}
		if _, ok := msgs[1].(frame.NoticeMsg); !ok {
			t.Errorf("message %T, want a notice", msgs[1])
		}
	})
	t.Run("oldest first with ListOldest", func(t *testing.T) {
		m, _ := setup(t, fakes.OldestArchive{Archive: fakes.Letters(300)})
		m = press(t, m, tuitest.Keys("o", "pgdown", "pgdown", "pgdown", "down")...)
		if !m.Oldest() {
			t.Fatal("o did not switch to oldest first")
		}
		if r, _ := m.Selected(); r.ID != 56 {
			t.Errorf("selected %d, want 56", r.ID)
		}
	})
}

func TestOutageRetry(t *testing.T) {
	t.Parallel()
	archive := fakes.Letters(500)
	m, _ := setup(t, archive)
	archive.SetErr(errDown)
	m = press(t, m, repeat("pgdown", 5)...)
	if !m.Window().Failed() {
		t.Fatal("the failed fetch is not recorded")
	}
	if v := m.View(); !bytes.Contains([]byte(v), []byte("could not load letters; retrying")) {
		t.Errorf("view does not say it is retrying:\n%s", v)
	}
	archive.SetErr(nil)
	m, _ = tuitest.Drive(t, m, update, m.Refresh())
	if m.Window().Failed() || m.Window().Pages() != 2 {
		t.Errorf("after the retry failed=%v pages=%d, want the next page", m.Window().Failed(), m.Window().Pages())
	}
}

var errDown = &downError{}

type downError struct{}

func (*downError) Error() string { return "connection refused" }

// TestGolden renders the list at two sizes with hostile letters among
// ordinary ones: every cell escaped, the layout exact.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"120x40", 120, 40}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			rows := []deadletter.Row{fakes.HostileLetter(1000)}
			for i := 1; i < 200; i++ {
				rows = append(rows, fakes.Letter(i))
			}
			svc := tuitest.Services(fakes.NewArchive(rows...), fakes.NewRequests("alice"))
			m := list.New(tuitest.Context(size.w, size.h), svc)
			m, first := m.Activate()
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("letter 1 of 200")) },
				teatest.WithDuration(5*time.Second))
			tm.Send(tuitest.Key("down"))
			tm.Send(tuitest.Key(" "))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("1 marked")) },
				teatest.WithDuration(5*time.Second))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			view := tm.FinalModel(t).View()
			tuitest.AssertSafe(t, view)
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}

func TestQueueCellNamesTheSystem(t *testing.T) {
	for _, tc := range []struct {
		row  deadletter.Row
		want string
	}{
		{deadletter.Row{SourceQueue: "reservation-expiry.dlq"}, "reservation-expiry.dlq"},
		{deadletter.Row{SourceQueue: "reservation-expiry.dlq", System: deadletter.RabbitMQ}, "reservation-expiry.dlq"},
		{deadletter.Row{SourceQueue: "arn:aws:sqs:eu-west-1:123456789012:reservation-expiry-dlq", System: deadletter.SQS}, "SQS reservation-expiry-dlq"},
		{deadletter.Row{SourceQueue: "arn:aws:sqs:eu-west-1:1:q\x1b[2J", System: deadletter.SQS}, `SQS q\x1b[2J`},
	} {
		if got := list.Cells(tc.row, func() string { return "" }, registry.Systems())[7]; got != tc.want {
			t.Errorf("queueCell(%q, %s) = %q, want %q", tc.row.SourceQueue, tc.row.System, got, tc.want)
		}
	}
}

// TestRefreshShowsNewCaptures: at the head of the list a refresh brings in
// the letters captured since, keeps the cursor on its letter and recounts.
func TestRefreshShowsNewCaptures(t *testing.T) {
	t.Parallel()
	archive := fakes.Letters(30)
	m, _ := setup(t, archive)
	m, _ = tuitest.Drive(t, m, update, nil, tuitest.Keys("down", "down")...)
	if r, _ := m.Selected(); r.ID != 28 {
		t.Fatalf("cursor on %d, want 28", r.ID)
	}
	archive.Capture(fakes.Letter(31), fakes.Letter(32), fakes.Letter(33))
	m, _ = tuitest.Drive(t, m, update, m.Refresh())
	if top, _ := m.Window().Row(0); top.ID != 33 {
		t.Errorf("top row %d after the refresh, want the new letter 33", top.ID)
	}
	if r, _ := m.Selected(); r.ID != 28 {
		t.Errorf("cursor on %d after the refresh, want it still on 28", r.ID)
	}
	if total, ok := m.Total(); !ok || total.N != 33 {
		t.Errorf("total %+v, want 33", total)
	}
	if !strings.Contains(m.View(), "letter 6 of 33") {
		t.Errorf("view:\n%s", m.View())
	}
}
