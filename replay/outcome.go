package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// OutcomeStats is what the policy's outcome query (Policy.OutcomeQuery) has
// said of the items a run confirmed: whether each reservation reached its
// terminal state, how long after the broker's confirm, and whether the
// transition was a duplicate (its idempotency key already recorded). An
// item is waiting while its outcome window is open and it is not terminal,
// unsettled once the window passed without it; an unsettled item that turns
// terminal later counts as terminal and late.
type OutcomeStats struct {
	// Watched counts the confirmed items asked about.
	Watched int
	// Terminal counts those that reached their terminal state; Late, of
	// them, after their window.
	Terminal, Late int
	// Waiting counts those not terminal whose window is still open;
	// Unsettled, those whose window passed.
	Waiting, Unsettled int
	// Conflicts counts the terminal ones that were duplicates.
	Conflicts int
	// LatencyP50 and LatencyP99 are nearest-rank percentiles of the time
	// from publish to transition (a worker may commit before the broker's
	// confirm reaches the runner), over the terminal items that were not
	// duplicates (a duplicate's transition was not this replay's); zero
	// when there are none.
	LatencyP50, LatencyP99 time.Duration
}

// MarshalJSON writes the latencies in seconds, as the run's other durations.
func (s OutcomeStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"watched": s.Watched, "terminal": s.Terminal, "late": s.Late, "waiting": s.Waiting,
		"unsettled": s.Unsettled, "conflicts": s.Conflicts,
		"latency_p50_seconds": s.LatencyP50.Seconds(), "latency_p99_seconds": s.LatencyP99.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *OutcomeStats) UnmarshalJSON(b []byte) error {
	var v struct {
		Watched, Terminal, Late, Waiting, Unsettled, Conflicts int
		P50                                                    float64 `json:"latency_p50_seconds"`
		P99                                                    float64 `json:"latency_p99_seconds"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = OutcomeStats{Watched: v.Watched, Terminal: v.Terminal, Late: v.Late, Waiting: v.Waiting, Unsettled: v.Unsettled,
		Conflicts: v.Conflicts, LatencyP50: seconds(v.P50), LatencyP99: seconds(v.P99)}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Line is the stats in a few words, for a progress line: "outcomes 96/100
// terminal, p50 120ms p99 1.4s, 2 conflicts, 1 unsettled".
func (s OutcomeStats) Line() string { return "outcomes " + s.Summary() }

// Summary is Line without its first word.
func (s OutcomeStats) Summary() string {
	parts := []string{fmt.Sprintf("%d/%d terminal", s.Terminal, s.Watched)}
	if s.Terminal-s.Conflicts > 0 {
		parts = append(parts, fmt.Sprintf("p50 %s p99 %s", roundLatency(s.LatencyP50), roundLatency(s.LatencyP99)))
	}
	parts = append(parts, fmt.Sprintf("%d conflicts", s.Conflicts))
	if s.Unsettled > 0 {
		parts = append(parts, fmt.Sprintf("%d unsettled", s.Unsettled))
	}
	return strings.Join(parts, ", ")
}

// roundLatency keeps two or three significant figures: 1.4s, 120ms, 850µs.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// known counts the items whose outcome is decided: terminal, or past
// their window.
func (s OutcomeStats) known() int { return s.Terminal + s.Unsettled }

// nearestRank is the p-th percentile of sorted by nearest rank (as
// PostgreSQL's percentile_disc), zero for none.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencyPercentiles are the p50 and p99 of latencies, which it sorts.
func latencyPercentiles(latencies []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(latencies)
	return nearestRank(latencies, 0.5), nearestRank(latencies, 0.99)
}

// outcomeLimits are the policy's outcome window and stop conditions, as a
// run read them when it started.
type outcomeLimits struct {
	window         time.Duration
	unsettledRatio float64
	conflictRatio  float64
}

func outcomeLimitsOf(p Policy) outcomeLimits {
	return outcomeLimits{window: p.OutcomeWindow, unsettledRatio: p.StopUnsettledRatio, conflictRatio: p.StopConflictRatio}
}

// The outcome stop conditions are decided by the plain functions below,
// over the stats the watcher counted. A nil *HaltError means "go on".

// unsettledRatioHalt halts when more than the stop condition's share of
// the items whose outcome is known are past their window and not terminal,
// once at least minimum outcomes are known (and never before the first).
func unsettledRatioHalt(request int64, lim outcomeLimits, s OutcomeStats, minimum int) *HaltError {
	known := s.known()
	if known < max(1, minimum) || s.Unsettled == 0 {
		return nil
	}
	ratio := float64(s.Unsettled) / float64(known)
	if ratio <= lim.unsettledRatio {
		return nil
	}
	return &HaltError{RequestID: request, Condition: ConditionUnsettledRatio,
		Reason: fmt.Sprintf("%d of %d confirmed items whose outcome is known did not reach their terminal state within the outcome window of %s (ratio %.3f, above the stop condition %g)",
			s.Unsettled, known, lim.window, ratio, lim.unsettledRatio)}
}

// conflictRatioHalt halts when more than the stop condition's share of the
// terminal items were duplicates (their idempotency key was already
// recorded), once at least minimum are terminal.
func conflictRatioHalt(request int64, lim outcomeLimits, s OutcomeStats, minimum int) *HaltError {
	if s.Terminal < max(1, minimum) || s.Conflicts == 0 {
		return nil
	}
	ratio := float64(s.Conflicts) / float64(s.Terminal)
	if ratio <= lim.conflictRatio {
		return nil
	}
	return &HaltError{RequestID: request, Condition: ConditionConflictRatio,
		Reason: fmt.Sprintf("%d of %d terminal items were idempotency conflicts: their key was already recorded before the replay (ratio %.3f, above the stop condition %g)",
			s.Conflicts, s.Terminal, ratio, lim.conflictRatio)}
}

// outcomeHalt judges the stats against both outcome stop conditions,
// unsettled first: a worker that stopped is the more urgent news.
func outcomeHalt(request int64, lim outcomeLimits, s OutcomeStats, minimum int) *HaltError {
	if h := unsettledRatioHalt(request, lim, s, minimum); h != nil {
		return h
	}
	return conflictRatioHalt(request, lim, s, minimum)
}

// OutcomeQueryError is the policy's outcome query failing (bad SQL, a
// missing table, a timeout, columns of the wrong type), as opposed to
// answering "not terminal yet". The run halts: outcomes that cannot be
// read cannot be watched.
type OutcomeQueryError struct {
	DeadLetterID int64
	Err          error
}

func (e *OutcomeQueryError) Error() string {
	return fmt.Sprintf("the policy's outcome query failed for dead letter %d: %v", e.DeadLetterID, e.Err)
}

func (e *OutcomeQueryError) Unwrap() error { return e.Err }
