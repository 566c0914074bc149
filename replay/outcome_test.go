package replay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOutcomeHalts(t *testing.T) {
	t.Parallel()
	lim := outcomeLimits{window: time.Minute, unsettledRatio: 0.1, conflictRatio: 0.2}
	tests := []struct {
		name    string
		s       OutcomeStats
		minimum int
		want    string
	}{
		{"nothing known yet", OutcomeStats{Watched: 5, Waiting: 5}, 1, ""},
		{"all terminal", OutcomeStats{Watched: 10, Terminal: 10}, 1, ""},
		{"unsettled at the ratio goes on", OutcomeStats{Watched: 10, Terminal: 9, Unsettled: 1}, 1, ""},
		{"unsettled above the ratio halts", OutcomeStats{Watched: 10, Terminal: 8, Unsettled: 2}, 1, ConditionUnsettledRatio},
		{"below the minimum nothing is judged", OutcomeStats{Watched: 3, Unsettled: 3}, 10, ""},
		{"the canary's one item, unsettled", OutcomeStats{Watched: 1, Unsettled: 1}, 1, ConditionUnsettledRatio},
		{"waiting items do not count", OutcomeStats{Watched: 100, Terminal: 10, Waiting: 90}, 10, ""},
		{"conflicts at the ratio go on", OutcomeStats{Watched: 10, Terminal: 10, Conflicts: 2}, 1, ""},
		{"conflicts above the ratio halt", OutcomeStats{Watched: 10, Terminal: 10, Conflicts: 3}, 1, ConditionConflictRatio},
		{"unsettled is judged first", OutcomeStats{Watched: 10, Terminal: 5, Unsettled: 5, Conflicts: 5}, 1, ConditionUnsettledRatio},
	}
	for _, tt := range tests {
		h := outcomeHalt(7, lim, tt.s, tt.minimum)
		switch {
		case tt.want == "" && h != nil:
			t.Errorf("%s: halted %s (%s), want none", tt.name, h.Condition, h.Reason)
		case tt.want != "" && (h == nil || h.Condition != tt.want):
			t.Errorf("%s: halt %+v, want %s", tt.name, h, tt.want)
		}
	}
	h := unsettledRatioHalt(7, lim, OutcomeStats{Terminal: 1, Unsettled: 3}, 1)
	if !strings.Contains(h.Reason, "3 of 4") || !strings.Contains(h.Reason, "outcome window of 1m0s") || !strings.Contains(h.Reason, "0.1") {
		t.Errorf("reason %q: want the counts, the window and the stop condition", h.Reason)
	}
}

func TestNearestRank(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		in       []time.Duration
		p50, p99 time.Duration
	}{
		{nil, 0, 0},
		{ms(5), 5 * time.Millisecond, 5 * time.Millisecond},
		{ms(4, 1, 3, 2), 2 * time.Millisecond, 4 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 5 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		if p50, p99 := latencyPercentiles(tt.in); p50 != tt.p50 || p99 != tt.p99 {
			t.Errorf("percentiles of %v = %v, %v; want %v, %v", tt.in, p50, p99, tt.p50, tt.p99)
		}
	}
}

func TestOutcomeAnswerOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if a, err := outcomeAnswerOf(1, nil, false); err != nil || a.terminalAt != nil {
		t.Errorf("no row = %+v, %v: want not terminal", a, err)
	}
	if a, err := outcomeAnswerOf(1, []any{at, true}, true); err != nil || a.terminalAt == nil || !a.terminalAt.Equal(at) || !a.duplicate {
		t.Errorf("(at, true) = %+v, %v", a, err)
	}
	if a, err := outcomeAnswerOf(1, []any{nil, nil}, true); err != nil || a.terminalAt != nil || a.duplicate {
		t.Errorf("(null, null) = %+v, %v: want not terminal", a, err)
	}
	if a, err := outcomeAnswerOf(1, []any{at}, true); err != nil || a.terminalAt == nil || a.duplicate {
		t.Errorf("one column = %+v, %v: want terminal, no duplicate", a, err)
	}
	for _, bad := range [][]any{{}, {"soon", false}, {at, "yes"}} {
		if _, err := outcomeAnswerOf(9, bad, true); !errors.As(err, new(*OutcomeQueryError)) {
			t.Errorf("%v: error %v, want an *OutcomeQueryError", bad, err)
		}
	}
}

// fakeOutcomes answers the watcher from a map of terminal times and
// records what it writes.
type fakeOutcomes struct {
	terminal map[int64]time.Time
	dup      map[int64]bool
	asked    [][]int64
	written  []outcomeRow
	err      error
}

func (f *fakeOutcomes) ask(_ context.Context, items []*watchedItem) ([]outcomeAnswer, error) {
	if f.err != nil {
		return nil, f.err
	}
	ids := []int64{}
	out := make([]outcomeAnswer, len(items))
	for i, it := range items {
		ids = append(ids, it.id)
		if at, ok := f.terminal[it.id]; ok {
			out[i] = outcomeAnswer{terminalAt: &at, duplicate: f.dup[it.id]}
		}
	}
	f.asked = append(f.asked, ids)
	return out, nil
}

func (f *fakeOutcomes) record(_ context.Context, rows []outcomeRow) error {
	f.written = append(f.written, rows...)
	return nil
}

func TestOutcomeWatchPolls(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := t0
	f := &fakeOutcomes{terminal: map[int64]time.Time{}, dup: map[int64]bool{}}
	w := newOutcomeWatch(time.Minute, time.Hour, f.ask, f.record)
	w.now = func() time.Time { return clock }
	for id := int64(1); id <= 4; id++ {
		w.add(id, outcomeJob{reservationID: "r"}, t0, t0, time.Time{})
	}

	// 1 and 2 reach their state; 2 was a duplicate.
	f.terminal[1], f.terminal[2], f.dup[2] = t0.Add(200*time.Millisecond), t0.Add(-time.Hour), true
	w.poll()
	s, _ := w.snapshot()
	if s.Watched != 4 || s.Terminal != 2 || s.Waiting != 2 || s.Conflicts != 1 || s.LatencyP50 != 200*time.Millisecond || len(f.written) != 2 {
		t.Fatalf("after the first poll %+v, %d written", s, len(f.written))
	}

	// The window passes: 3 and 4 are unsettled, recorded once.
	clock = t0.Add(2 * time.Minute)
	w.poll()
	w.poll()
	s, _ = w.snapshot()
	if s.Unsettled != 2 || s.Waiting != 0 || len(f.written) != 4 || f.written[2].terminalAt != nil {
		t.Fatalf("past the window %+v, written %+v", s, f.written)
	}
	if got := f.asked[len(f.asked)-1]; len(got) != 2 {
		t.Fatalf("the last poll asked about %v: terminal items are not asked again, unsettled ones are", got)
	}

	// 3 turns terminal late.
	f.terminal[3] = t0.Add(90 * time.Second)
	w.poll()
	s, _ = w.snapshot()
	if s.Unsettled != 1 || s.Terminal != 3 || s.Late != 1 || len(f.written) != 5 || s.LatencyP99 != 90*time.Second {
		t.Fatalf("a late transition %+v, %d written", s, len(f.written))
	}

	f.err = errors.New("connection refused")
	w.add(5, outcomeJob{}, clock, clock, time.Time{})
	w.poll()
	if _, err := w.snapshot(); err == nil {
		t.Fatal("a failing query left no error")
	}
}

// TestOutcomeWatchWaitsOutADelay: a message SQS delays (sent before its
// time with the rest of the wait as its delivery delay) reaches no worker
// before its time, so its window, and its latency, count from then, not
// from its confirm: a replay sent ten minutes early under a one-minute
// window is neither unsettled nor late when its job ends thirty seconds
// after it was handed out.
func TestOutcomeWatchWaitsOutADelay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	due := t0.Add(10 * time.Minute)
	clock := t0
	f := &fakeOutcomes{terminal: map[int64]time.Time{}, dup: map[int64]bool{}}
	w := newOutcomeWatch(time.Minute, time.Hour, f.ask, f.record)
	w.now = func() time.Time { return clock }
	w.add(1, outcomeJob{reservationID: "r"}, t0, t0, due)

	clock = t0.Add(5 * time.Minute)
	w.poll()
	if s, _ := w.snapshot(); s.Unsettled != 0 || s.Waiting != 1 {
		t.Fatalf("before its time %+v: want it still waiting", s)
	}
	f.terminal[1] = due.Add(30 * time.Second)
	clock = due.Add(40 * time.Second)
	w.poll()
	s, _ := w.snapshot()
	if s.Terminal != 1 || s.Late != 0 || s.Unsettled != 0 || s.LatencyP50 != 30*time.Second {
		t.Fatalf("after its time %+v: want terminal, not late, 30s latency", s)
	}
}
