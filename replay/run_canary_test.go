package replay

import (
	"testing"
	"time"
)

// The canary's decisions are plain functions: these tests need neither
// broker nor database.

func TestCanaryResume(t *testing.T) {
	t.Parallel()
	waited := 3 * time.Second
	for _, tc := range []struct {
		name       string
		size       int
		items      int
		passed     bool
		started    *time.Duration
		wantTarget int
		wantWait   *time.Duration
	}{
		{name: "no canary", size: 0, items: 50},
		{name: "already passed", size: 5, items: 50, passed: true},
		{name: "passed wins over a start", size: 5, items: 50, passed: true, started: &waited},
		{name: "published by an earlier run", size: 5, items: 50, started: &waited, wantWait: &waited},
		{name: "still to publish", size: 5, items: 50, wantTarget: 5},
		{name: "the whole cohort gates nothing", size: 1, items: 1},
		{name: "a canary past the cohort", size: 8, items: 5},
		{name: "a whole-cohort canary an earlier run published", size: 1, items: 1, started: &waited, wantWait: &waited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, wait := canaryResume(tc.size, Request{Canary: tc.size, Items: tc.items}.CanaryGates(), tc.passed, tc.started)
			if target != tc.wantTarget || (wait == nil) != (tc.wantWait == nil) || (wait != nil && *wait != *tc.wantWait) {
				t.Fatalf("canaryResume = %d, %v; want %d, %v", target, wait, tc.wantTarget, tc.wantWait)
			}
		})
	}
}

func TestCanaryPhaseOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		target, published int
		drained           bool
		want              canaryPhase
	}{
		{"no canary phase", 0, 0, false, canaryPublishing},
		{"no canary phase, drained", 0, 0, true, canaryPublishing},
		{"going out", 5, 3, false, canaryPublishing},
		{"all out", 5, 5, false, canaryOut},
		{"cohort ran out early", 5, 2, true, canaryOut},
		{"cohort had nothing to publish", 5, 0, true, canaryEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := canaryPhaseOf(tc.target, tc.published, tc.drained); got != tc.want {
				t.Fatalf("canaryPhaseOf(%d, %d, %v) = %d, want %d", tc.target, tc.published, tc.drained, got, tc.want)
			}
		})
	}
}

func TestCanaryAsk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                                        string
		target, published, queued, requested, chunk int
		wantMore                                    bool
		want                                        int
	}{
		{"the whole canary", 5, 0, 0, 0, 100, true, 5},
		{"at most a chunk", 500, 0, 0, 0, 100, true, 100},
		{"what is left", 5, 2, 1, 0, 100, true, 2},
		{"asked for already", 5, 2, 1, 2, 100, false, 0},
		{"all published", 5, 5, 0, 0, 100, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := canaryAsk(tc.target, tc.published, tc.queued, tc.requested, tc.chunk)
			if (got > 0) != tc.wantMore || (tc.wantMore && got != tc.want) {
				t.Fatalf("canaryAsk = %d, want %d (ask more: %v)", got, tc.want, tc.wantMore)
			}
		})
	}
}

func TestJudgeCanary(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
	stop := StopConditions{FailureRatio: 0.1}
	for _, tc := range []struct {
		name              string
		now               time.Time
		attempted, failed int
		want              canaryVerdict
	}{
		{"in the window", end.Add(-time.Second), 2, 2, canaryWaiting},
		{"at its end, all confirmed", end, 2, 0, canaryPassed},
		{"after its end, one of two failed", end.Add(time.Second), 2, 1, canaryFailed},
		{"one failure of one, no minimum", end, 1, 1, canaryFailed},
		{"at the ratio", end, 10, 1, canaryPassed},
		{"nothing attempted", end, 0, 0, canaryPassed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, h := judgeCanary(tc.now, end, 7, stop, tc.attempted, tc.failed)
			if got != tc.want {
				t.Fatalf("judgeCanary = %d, want %d", got, tc.want)
			}
			if (h != nil) != (got == canaryFailed) {
				t.Fatalf("judgeCanary = %d with halt %v: a halt comes with a failed canary only", got, h)
			}
			if h != nil && (h.Condition != ConditionFailureRatio || h.RequestID != 7) {
				t.Fatalf("halt = %+v, want failure-ratio of request 7", h)
			}
		})
	}
}
