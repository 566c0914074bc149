package replay_test

import (
	"math"
	"testing"

	"github.com/expiryctl/expiryctl/replay"
)

// The values below are worked by hand from the formulas of issue 14:
// upper bound R·(1+n), planning bound R·(1−p^(n+1))/(1−p).
func TestLoadBoundsAgainstHandComputedValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		r, p            float64
		n               int
		amplification   float64
		upper, planning float64
	}{
		// 1 + 0.5 + 0.25 + 0.125 = 1.875
		{"half fail, three retries", 10, 0.5, 3, 1.875, 40, 18.75},
		// 1 + 0.2 + 0.04 + 0.008 + 0.0016 = 1.2496
		{"a fifth fail, four retries (the reference worker's budget of 5)", 12, 0.2, 4, 1.2496, 60, 14.9952},
		// (1 − 0.9^3)/(1 − 0.9) = 0.271/0.1 = 2.71
		{"most fail, two retries", 100, 0.9, 2, 2.71, 300, 271},
		{"nothing fails: one attempt per job", 40, 0, 4, 1, 200, 40},
		{"everything fails: the planning model meets the upper bound", 7, 1, 4, 5, 35, 35},
		{"no retries: p does not matter", 25, 0.6, 0, 1, 25, 25},
		{"no arrivals: no load", 0, 0.5, 3, 1.875, 0, 0},
		{"a fraction above 1 is read as 1", 2, 1.5, 2, 3, 6, 6},
		{"a negative budget is read as none", 3, 0.5, -2, 1, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := replay.Amplification(tc.p, tc.n); !near(got, tc.amplification) {
				t.Errorf("Amplification(%g, %d) = %g, want %g", tc.p, tc.n, got, tc.amplification)
			}
			if got := replay.UpperBound(tc.r, tc.n); !near(got, tc.upper) {
				t.Errorf("UpperBound(%g, %d) = %g, want %g", tc.r, tc.n, got, tc.upper)
			}
			if got := replay.PlanningBound(tc.r, tc.p, tc.n); !near(got, tc.planning) {
				t.Errorf("PlanningBound(%g, %g, %d) = %g, want %g", tc.r, tc.p, tc.n, got, tc.planning)
			}
			if got := replay.PlanningBound(tc.r, tc.p, tc.n); got > replay.UpperBound(tc.r, tc.n)+1e-9 {
				t.Errorf("planning bound %g above the upper bound %g", got, replay.UpperBound(tc.r, tc.n))
			}
		})
	}
}

func TestSuggestRateKeepsOfferedLoadUnderTheAckRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                        string
		arrivals, amp, ack, ceiling float64
		want                        float64
		limitedBy                   string
	}{
		// 50/1.875 = 26.666…, less 10 arriving: 16.666… → 16.66
		{"headroom decides", 10, 1.875, 50, 100, 16.66, replay.LimitedByHeadroom},
		{"the ceiling decides", 10, 1.875, 50, 10, 10, replay.LimitedByCeiling},
		// 15/1.875 = 8 < 10 arriving
		{"the live load alone fills the consumers", 10, 1.875, 15, 100, 0, replay.LimitedByNoHeadroom},
		// 18.75/1.875 = 10 = arrivals: nothing left
		{"exactly full", 10, 1.875, 18.75, 100, 0, replay.LimitedByNoHeadroom},
		{"idle consumers ack nothing", 0, 1, 0, 100, 0, replay.LimitedByNoHeadroom},
		// 60/1.2496 = 48.015…, less 12: 36.015… → 36.01
		{"the reference worker's budget", 12, 1.2496, 60, 50, 36.01, replay.LimitedByHeadroom},
		{"an amplification below 1 is read as 1", 5, 0.5, 20, 100, 15, replay.LimitedByHeadroom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, by := replay.SuggestRate(tc.arrivals, tc.amp, tc.ack, tc.ceiling)
			if !near(got, tc.want) || by != tc.limitedBy {
				t.Fatalf("SuggestRate(%g, %g, %g, %g) = %g, %s; want %g, %s", tc.arrivals, tc.amp, tc.ack, tc.ceiling, got, by, tc.want, tc.limitedBy)
			}
			if got > tc.ceiling {
				t.Errorf("suggested %g above the ceiling %g", got, tc.ceiling)
			}
			if offered := (tc.arrivals + got) * max(tc.amp, 1); got > 0 && offered > tc.ack+1e-9 {
				t.Errorf("offered load %g at the suggested rate exceeds the ack rate %g", offered, tc.ack)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }
