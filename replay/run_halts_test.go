package replay

import (
	"errors"
	"testing"
)

// The stop conditions are plain functions: these tests need neither broker
// nor database.

var haltStop = StopConditions{FailureRatio: 0.1, QueueDepth: 100, RedeadRatio: 0.2}

func TestFailureRatioHalt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                          string
		attempted, failed, minAttempt int
		want                          string // the halt's reason, "" for none
	}{
		{"nothing attempted", 0, 0, 1, ""},
		{"nothing attempted, no minimum", 0, 0, 0, ""},
		{"below the minimum", 9, 9, 10, ""},
		{"at the minimum, above the ratio", 10, 2, 10, "2 of 10 publishes failed (ratio 0.200, above the stop condition 0.1)"},
		{"at the ratio is not above it", 10, 1, 10, ""},
		{"no failures", 50, 0, 10, ""},
		{"canary: one of one", 1, 1, 1, "1 of 1 publishes failed (ratio 1.000, above the stop condition 0.1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := failureRatioHalt(7, haltStop, tc.attempted, tc.failed, tc.minAttempt)
			wantHalt(t, h, ConditionFailureRatio, tc.want)
		})
	}
}

func TestQueueDepthHalt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		depths []queueDepth
		want   string
	}{
		{"no queues", nil, ""},
		{"at the limit", []queueDepth{{"q", 100}}, ""},
		{"the first above it", []queueDepth{{"a", 5}, {"b", 101}, {"c", 500}}, "queue b holds 101 messages, above the stop condition of 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantHalt(t, queueDepthHalt(7, haltStop, tc.depths), ConditionQueueDepth, tc.want)
		})
	}
}

func TestRedeadRatioHalt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		redead, confirmed int
		want              string
	}{
		{"nothing confirmed", 3, 0, ""},
		{"none died again", 0, 10, ""},
		{"fewer than before the run", -2, 10, ""},
		{"at the ratio", 2, 10, ""},
		{"above the ratio", 3, 10, "3 of 10 replayed letters died again (ratio 0.300, above the stop condition 0.2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantHalt(t, redeadRatioHalt(7, haltStop, tc.redead, tc.confirmed), ConditionRedeadRatio, tc.want)
		})
	}
}

func TestFailureMinimum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                     string
		runMinimum, canary, want int
		inCanary                 bool
	}{
		{"mid-run", 10, 2, 10, false},
		{"canary smaller than the minimum", 10, 2, 2, true},
		{"canary larger than the minimum", 10, 50, 10, true},
		{"canary of none still wants one", 10, 0, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureMinimum(tc.runMinimum, tc.canary, tc.inCanary); got != tc.want {
				t.Errorf("failureMinimum(%d, %d, %v) = %d, want %d", tc.runMinimum, tc.canary, tc.inCanary, got, tc.want)
			}
		})
	}
}

func TestProbeHaltJudgesInOrder(t *testing.T) {
	t.Parallel()
	deep := []queueDepth{{"q", 1000}}
	for _, tc := range []struct {
		name                           string
		attempted, failed, minAttempts int
		depths                         []queueDepth
		redead, confirmed              int
		want                           string // condition, "" for none
	}{
		{"all well", 20, 0, 10, []queueDepth{{"q", 1}}, 0, 20, ""},
		{"failure ratio before depth and redead", 20, 10, 10, deep, 10, 10, ConditionFailureRatio},
		{"failures below the minimum: depth", 5, 5, 10, deep, 10, 10, ConditionQueueDepth},
		{"depth before redead", 20, 0, 10, deep, 10, 10, ConditionQueueDepth},
		{"redead last", 20, 0, 10, nil, 10, 10, ConditionRedeadRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := probeHalt(7, haltStop, tc.attempted, tc.failed, tc.minAttempts, tc.depths, tc.redead, tc.confirmed)
			switch {
			case tc.want == "" && h != nil:
				t.Fatalf("halted on %s (%s), want no halt", h.Condition, h.Reason)
			case tc.want != "" && h == nil:
				t.Fatalf("no halt, want %s", tc.want)
			case h != nil && h.Condition != tc.want:
				t.Fatalf("halted on %s, want %s", h.Condition, tc.want)
			}
		})
	}
}

func TestEndReason(t *testing.T) {
	t.Parallel()
	lost := errors.New("no confirm")
	recFailed := errors.New("connection reset")
	refused := &Refusal{Rule: "approved-to-run", Message: "not running"}
	halt := &stopReason{halt: &HaltError{Condition: ConditionQueueDepth}}
	loopErr := &stopReason{err: errors.New("interrupted")}
	cancelled := &stopReason{stopped: StatusCancelled}
	for _, tc := range []struct {
		name        string
		stop        *stopReason
		lost, rec   error
		want        *stopReason
		wantErr     error
		wantStopped Status
	}{
		{name: "everything went out", want: nil},
		{name: "a lost answer when nothing else stopped", lost: lost, wantErr: lost},
		{name: "a halt outranks a lost answer", stop: halt, lost: lost, want: halt},
		{name: "a recorder refusal is a cancel", stop: loopErr, rec: refused, wantStopped: StatusCancelled},
		{name: "a recorder error replaces a halt", stop: halt, rec: recFailed, wantErr: recFailed},
		{name: "a recorder error replaces a cancel", stop: cancelled, rec: recFailed, wantErr: recFailed},
		{name: "an earlier error outranks the recorder's", stop: loopErr, rec: recFailed, want: loopErr},
		{name: "a recorder error when all went out", rec: recFailed, wantErr: recFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := endReason(tc.stop, tc.lost, tc.rec)
			switch {
			case tc.wantErr != nil:
				if got == nil || !errors.Is(got.err, tc.wantErr) {
					t.Fatalf("endReason = %+v, want the error %v", got, tc.wantErr)
				}
			case tc.wantStopped != "":
				if got == nil || got.stopped != tc.wantStopped {
					t.Fatalf("endReason = %+v, want stopped %s", got, tc.wantStopped)
				}
			case got != tc.want:
				t.Fatalf("endReason = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func wantHalt(t *testing.T, h *HaltError, condition, reason string) {
	t.Helper()
	switch {
	case reason == "" && h != nil:
		t.Fatalf("halted (%s: %s), want no halt", h.Condition, h.Reason)
	case reason == "":
	case h == nil:
		t.Fatalf("no halt, want %s: %s", condition, reason)
	case h.RequestID != 7 || h.Condition != condition || h.Reason != reason:
		t.Fatalf("halt = %d %s: %s, want 7 %s: %s", h.RequestID, h.Condition, h.Reason, condition, reason)
	}
}
