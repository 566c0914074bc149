package replay

import (
	"context"
	"fmt"
)

func (x *replayRun) failureHalt(minAttempts int) *HaltError {
	st := x.st
	if st.attempted < minAttempts || st.attempted == 0 {
		return nil
	}
	ratio := float64(st.failedRun) / float64(st.attempted)
	if ratio <= st.req.Stop.FailureRatio {
		return nil
	}
	return &HaltError{RequestID: st.req.ID, Condition: ConditionFailureRatio,
		Reason: fmt.Sprintf("%d of %d publishes failed (ratio %.3f, above the stop condition %g)", st.failedRun, st.attempted, ratio, st.req.Stop.FailureRatio)}
}

// redeadHalt counts letters of this request captured again (dead-lettered
// after their replay; `dlq ingest` links them by x-replay-request) and
// judges them.
func (x *replayRun) redeadHalt(ctx context.Context) (*HaltError, error) {
	var n int
	if err := x.r.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, x.st.req.ID).Scan(&n); err != nil {
		return nil, err
	}
	return x.redeadFrom(n), nil
}

// redeadFrom judges n, the request's letters captured again so far: those
// since the run started, over the items this run confirmed.
func (x *replayRun) redeadFrom(n int) *HaltError {
	st := x.st
	if st.confirmedRun == 0 {
		return nil
	}
	redead := n - st.redeadBase
	ratio := float64(redead) / float64(st.confirmedRun)
	if redead <= 0 || ratio <= st.req.Stop.RedeadRatio {
		return nil
	}
	return &HaltError{RequestID: st.req.ID, Condition: ConditionRedeadRatio,
		Reason: fmt.Sprintf("%d of %d replayed letters died again (ratio %.3f, above the stop condition %g)", redead, st.confirmedRun, ratio, st.req.Stop.RedeadRatio)}
}
