package summary_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/summary"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m summary.Model, msg tea.Msg) (summary.Model, tea.Cmd) { return m.Update(msg) }

func fixture() (*fakes.Archive, *fakes.Requests) {
	a := fakes.Letters(40)
	approved := fakes.Request(2, "alice", 3)
	approved.Status = replay.StatusApproved
	done := fakes.Request(3, "alice", 3)
	done.Status = replay.StatusCompleted
	return a, fakes.NewRequests("bob", fakes.Request(1, "alice", 5), approved, done, fakes.Request(4, "carol", 1))
}

// incident is the fixture's archive during an incident: besides the 40
// old letters, 24 arrived in the last hour, most in the last minutes, and
// 6 of them are holds past their deadline.
func incident() (*fakes.Archive, *fakes.Requests) {
	_, r := fixture()
	var rows []deadletter.Row
	for i := 1; i <= 40; i++ {
		rows = append(rows, fakes.Letter(i))
	}
	recent := []struct {
		minutesAgo int
		category   deadletter.Category
	}{
		{55, deadletter.Validation}, {41, deadletter.Validation}, {30, deadletter.TransientExhausted},
		{12, deadletter.TransientExhausted}, {7, deadletter.NotFound}, {4, deadletter.TransientExhausted},
		{3, deadletter.TransientExhausted}, {3, deadletter.TransientExhausted}, {2, deadletter.TransientExhausted},
		{2, deadletter.TransientExhausted}, {2, deadletter.Validation}, {1, deadletter.TransientExhausted},
		{1, deadletter.TransientExhausted}, {1, deadletter.TransientExhausted}, {1, deadletter.TransientExhausted},
		{0, deadletter.TransientExhausted}, {0, deadletter.TransientExhausted}, {0, deadletter.TransientExhausted},
		{0, deadletter.TransientExhausted}, {0, deadletter.TransientExhausted}, {0, deadletter.TransientExhausted},
		{0, deadletter.Validation}, {0, deadletter.NotFound}, {0, deadletter.TransientExhausted},
	}
	for i, l := range recent {
		row := fakes.Letter(100 + i)
		row.Category = l.category
		row.DeadLetteredAt = fakes.Epoch.Add(-time.Duration(l.minutesAgo)*time.Minute - 30*time.Second)
		if i < 6 {
			due := fakes.Epoch.Add(-time.Duration(10*(i+1)) * time.Minute)
			row.DueAt = &due
		}
		rows = append(rows, row)
	}
	return fakes.NewArchive(rows...), r
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys []string
		want deadletter.Filter
	}{
		{name: "enter on all", keys: []string{"enter"}, want: deadletter.Filter{}},
		{name: "enter on the first category", keys: []string{"down", "enter"}, want: deadletter.Filter{Categories: []deadletter.Category{deadletter.TransientExhausted}}},
		{name: "down past the end stays on the last", keys: []string{"j", "j", "j", "j", "j", "j", "enter"}, want: deadletter.Filter{Categories: []deadletter.Category{deadletter.Conflict}}},
		{name: "a lists all", keys: []string{"down", "a"}, want: deadletter.Filter{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, r := fixture()
			m, first := summary.New(tuitest.Context(80, 21), tuitest.Services(a, r), 0).Refresh()
			m, _ = tuitest.Drive(t, m, update, first)
			var msgs []tea.Msg
			for _, k := range tt.keys {
				var got []tea.Msg
				m, got = tuitest.Drive(t, m, update, nil, tuitest.Key(k))
				msgs = append(msgs, got...)
			}
			show, ok := msgs[len(msgs)-1].(frame.ShowLettersMsg)
			if !ok {
				t.Fatalf("last message %T, want ShowLettersMsg", msgs[len(msgs)-1])
			}
			if got, want := show.Filter.Categories, tt.want.Categories; len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
				t.Errorf("filter categories %v, want %v", got, want)
			}
		})
	}
}

func TestStaleOnFailureAndNoPileUp(t *testing.T) {
	t.Parallel()
	a, r := fixture()
	m, first := summary.New(tuitest.Context(80, 21), tuitest.Services(a, r), 2*time.Second).Refresh()
	if _, again := m.Refresh(); again != nil {
		t.Fatal("a second refresh started while the first was in flight")
	}
	m, _ = tuitest.Drive(t, m, update, first)
	a.SetErr(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	m, cmd := m.Refresh()
	m, _ = tuitest.Drive(t, m, update, cmd)
	v := m.View()
	if !strings.Contains(v, "stale: the last refresh failed") || !strings.Contains(v, "transient-exhausted") {
		t.Errorf("after a failed refresh the view should keep the data and say it is stale:\n%s", v)
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name   string
		w, h   int
		queues deadletter.QueueReport
	}{
		{"80x24", 80, 24, fakes.TopologyReport("reservation-expiry")},
		{"120x40", 120, 40, fakes.TopologyReport("reservation-expiry")},
		{"80x30_no_management_api", 80, 30, fakes.Unavailable("GET http://guest:xxxxx@127.0.0.1:15672/api/queues: connection refused\x1b[2J")},
	} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			a, r := incident()
			svc := tuitest.Services(a, r)
			svc.LiveQueues, svc.WorkQueue = &fakes.LiveQueues{Report: size.queues}, "reservation-expiry"
			m, first := summary.New(tuitest.Context(size.w, size.h), svc, 2*time.Second).Refresh()
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("approved 1")) },
				teatest.WithDuration(5*time.Second))
			tm.Send(tuitest.Key("down"))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			view := tm.FinalModel(t).View()
			tuitest.AssertFits(t, view, size.w, size.h)
			golden.RequireEqual(t, []byte(view))
		})
	}
}

func incidentModel(t *testing.T, w, h int, queues *fakes.LiveQueues) (summary.Model, *fakes.Archive) {
	t.Helper()
	a, r := incident()
	svc := tuitest.Services(a, r)
	if queues != nil {
		svc.LiveQueues, svc.WorkQueue = queues, "reservation-expiry"
	}
	m, first := summary.New(tuitest.Context(w, h), svc, 2*time.Second).Refresh()
	m, _ = tuitest.Drive(t, m, update, first)
	return m, a
}

// TestHoldsAtSource: the reservation database's holds past their
// deadline show beside the archive's overdue letters, with how many no
// letter speaks for; a database that cannot answer says so without its
// password; a policy without a gap query leaves the line out.
func TestHoldsAtSource(t *testing.T) {
	t.Parallel()
	oldest := fakes.Epoch.Add(-90 * time.Minute)
	for _, c := range []struct {
		name string
		gap  replay.HoldsGap
		err  error
		want string
	}{
		// 11 held past their deadline; the incident's overdue letters
		// speak for 5 of them: 3 transient and 2 validation (failed for
		// good, the hold still held); its not-found letter's hold is gone.
		{"read", replay.HoldsGap{PastDeadline: 11, OldestDeadline: &oldest, At: fakes.Epoch}, nil,
			"at source: 11 holds past deadline, oldest 1h30m0s late, 6 no letter speaks for"},
		{"unavailable", replay.HoldsGap{}, &replay.GapQueryError{Err: errors.New("dial postgres://ro:hunter2@db/r: refused")},
			"at source: unavailable (the policy's gap query failed against the reservation database: dial postgres://ro:xxxxx"},
		{"no gap query", replay.HoldsGap{}, replay.ErrNoGapQuery, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, r := incident()
			svc := tuitest.Services(a, r)
			svc.HoldsGap = func(context.Context) (replay.HoldsGap, error) { return c.gap, c.err }
			m, first := summary.New(tuitest.Context(120, 40), svc, 2*time.Second).Refresh()
			m, _ = tuitest.Drive(t, m, update, first)
			v := m.View()
			if c.want == "" {
				if strings.Contains(v, "at source") {
					t.Errorf("a policy without a gap query shows a line for it:\n%s", v)
				}
				return
			}
			if !strings.Contains(v, c.want) || strings.Contains(v, "hunter2") {
				t.Errorf("the view lacks %q:\n%s", c.want, v)
			}
		})
	}
}

func TestIncidentSignals(t *testing.T) {
	t.Parallel()
	queues := &fakes.LiveQueues{Report: fakes.TopologyReport("reservation-expiry")}
	m, a := incidentModel(t, 120, 40, queues)
	v := m.View()
	for _, want := range []string{
		"arrivals: 3.8/min last 5 min, rising ×9.5 vs 1h",
		"overdue holds: 3, max 1h00m late, p99 1h00m · 3 failed for good, not paged",
		"reservation-expiry: ready 3, oldest 12s · in flight 2 (1 consumer)",
		"scheduled 5 in 2 retry queues · isolated 7 in the DLQ, oldest 1m",
		"transient-exhausted ·",
		"18/h",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("the view lacks %q:\n%s", want, v)
		}
	}
	if len(a.SignalCalls) != 1 || a.SignalCalls[0] != (deadletter.SignalsOptions{}) {
		t.Errorf("signals read %v, want once, unbounded", a.SignalCalls)
	}
	if a.Summaries != 0 {
		t.Errorf("the categories read %d times besides the signals, which carry them", a.Summaries)
	}
	if queues.Calls() != 1 || queues.Asked[0] != "reservation-expiry" {
		t.Errorf("live queues asked %v, want reservation-expiry once", queues.Asked)
	}

	// A refresh that fails keeps the last signals on screen, marked stale.
	a.SetErr(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	m, cmd := m.Refresh()
	m, _ = tuitest.Drive(t, m, update, cmd)
	v = m.View()
	if !strings.Contains(v, "overdue holds: 3") || !strings.Contains(v, "18/h") || !strings.Contains(v, "stale: the last refresh failed") {
		t.Errorf("after a failed refresh the signals should stay, marked stale:\n%s", v)
	}
}

func TestLiveQueuesMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		queues *fakes.LiveQueues
		want   []string
	}{
		{"not given", nil, []string{"live queues: not read"}},
		{"unreachable", &fakes.LiveQueues{Report: fakes.Unavailable("dial tcp 127.0.0.1:15672: connection refused")},
			[]string{"live queues of reservation-expiry: unavailable", "dial tcp 127.0.0.1:15672: connection refused"}},
		{"failed", &fakes.LiveQueues{Err: errors.New("queue \x1b]0;pwned\x07 refused")},
			[]string{"live queues of reservation-expiry: unavailable", `\x1b]0;pwned\x07`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := incidentModel(t, 100, 40, tt.queues)
			v := m.View()
			for _, want := range tt.want {
				if !strings.Contains(v, want) {
					t.Errorf("the view lacks %q:\n%s", want, v)
				}
			}
			if strings.ContainsAny(v, "\x1b\x07") {
				t.Errorf("a control character reached the terminal:\n%q", v)
			}
			if !strings.Contains(v, "overdue holds: 3") || strings.Contains(v, "stale") {
				t.Errorf("a broker that cannot be read should leave the rest as it is:\n%s", v)
			}
		})
	}
}

func TestSparklinesFitNarrowFrames(t *testing.T) {
	t.Parallel()
	for _, w := range []int{40, 60, 79, 80, 81, 100, 140} {
		m, _ := incidentModel(t, w, 40, &fakes.LiveQueues{Report: fakes.TopologyReport("reservation-expiry")})
		v := m.View()
		tuitest.AssertFits(t, v, w, 40)
		for _, line := range strings.Split(v, "\n") {
			spark := strings.HasPrefix(line, "  transient-exhausted ") && strings.ContainsAny(line, "·▁▂▃▄▅▆▇█")
			if spark && !strings.Contains(line, "18/h") && w >= 60 {
				t.Errorf("width %d: the sparkline's total was cut: %q", w, line)
			}
		}
	}
}

// TestRunnersGoneCounted: a running request that no runner holds is not
// work in progress; the summary's count of running requests says so.
func TestRunnersGoneCounted(t *testing.T) {
	t.Parallel()
	a, _ := fixture()
	held, gone := true, false
	running := fakes.Request(5, "alice", 3)
	running.Status, running.RunnerHeld = replay.StatusRunning, &held
	orphan := fakes.Request(6, "alice", 3)
	orphan.Status, orphan.RunnerHeld = replay.StatusRunning, &gone
	r := fakes.NewRequests("bob", running, orphan)
	m, first := summary.New(tuitest.Context(80, 24), tuitest.Services(a, r), 0).Refresh()
	m, _ = tuitest.Drive(t, m, update, first)
	if v := m.View(); !strings.Contains(v, "running 2 (1 with no runner)") {
		t.Errorf("the summary should say how many running requests no runner holds:\n%s", v)
	}
}
