package replay

import (
	"context"
	"fmt"
)

// The stop conditions are decided by the plain functions below, over the
// numbers a run has counted and a probe has read; the run only gathers the
// numbers and acts on the answer. A nil *HaltError means "go on".

// failureRatioHalt halts when more than stop.FailureRatio of this run's
// attempted publishes failed, once at least minAttempts were attempted (and
// never before the first): a run judged on its first failed publish would
// halt on one unlucky message.
func failureRatioHalt(request int64, stop StopConditions, attempted, failed, minAttempts int) *HaltError {
	if attempted < minAttempts || attempted == 0 {
		return nil
	}
	ratio := float64(failed) / float64(attempted)
	if ratio <= stop.FailureRatio {
		return nil
	}
	return &HaltError{RequestID: request, Condition: ConditionFailureRatio,
		Reason: fmt.Sprintf("%d of %d publishes failed (ratio %.3f, above the stop condition %g)", failed, attempted, ratio, stop.FailureRatio)}
}

// queueDepthHalt halts on the first target queue that holds more messages
// than stop.QueueDepth: the headroom is gone.
func queueDepthHalt(request int64, stop StopConditions, depths []queueDepth) *HaltError {
	for _, d := range depths {
		if d.depth > stop.QueueDepth {
			return &HaltError{RequestID: request, Condition: ConditionQueueDepth,
				Reason: fmt.Sprintf("queue %s holds %d messages, above the stop condition of %d", d.queue, d.depth, stop.QueueDepth)}
		}
	}
	return nil
}

// redeadRatioHalt halts when more than stop.RedeadRatio of the items this
// run confirmed died again: redead counts the request's letters captured
// again since the run started. Nothing is judged before a first confirm.
func redeadRatioHalt(request int64, stop StopConditions, redead, confirmed int) *HaltError {
	if confirmed == 0 {
		return nil
	}
	ratio := float64(redead) / float64(confirmed)
	if redead <= 0 || ratio <= stop.RedeadRatio {
		return nil
	}
	return &HaltError{RequestID: request, Condition: ConditionRedeadRatio,
		Reason: fmt.Sprintf("%d of %d replayed letters died again (ratio %.3f, above the stop condition %g)", redead, confirmed, ratio, stop.RedeadRatio)}
}

// failureMinimum is how many publishes a mid-run check wants before it
// judges the failure ratio: the runner's minimum, or during the canary the
// canary's size when that is smaller (at least one), so that a failing
// canary halts before its window is out.
func failureMinimum(runMinimum, canary int, inCanary bool) int {
	if inCanary {
		return min(runMinimum, max(1, canary))
	}
	return runMinimum
}

// probeHalt judges one check's numbers against every stop condition, in
// the order a check applies them: failure ratio, queue depth, re-dead ratio.
func probeHalt(request int64, stop StopConditions, attempted, failed, minAttempts int, depths []queueDepth, redead, confirmed int) *HaltError {
	if h := failureRatioHalt(request, stop, attempted, failed, minAttempts); h != nil {
		return h
	}
	if h := queueDepthHalt(request, stop, depths); h != nil {
		return h
	}
	return redeadRatioHalt(request, stop, redead, confirmed)
}

// failureHalt judges this run's publishes so far.
func (x *replayRun) failureHalt(minAttempts int) *HaltError {
	st := x.st
	return failureRatioHalt(st.req.ID, st.req.Stop, st.attempted, st.failedRun, minAttempts)
}

// redeadHalt counts letters of this request captured again (dead-lettered
// after their replay; `dlq ingest` links them by x-replay-request) and
// judges them.
func (x *replayRun) redeadHalt(ctx context.Context) (*HaltError, error) {
	n, err := x.r.tables().RunRedeadLettered(ctx, x.st.req.ID)
	if err != nil {
		return nil, err
	}
	if err := x.st.dlqs.failed(); err != nil {
		return nil, err
	}
	x.st.readRedead(n)
	return x.redeadFrom(n), nil
}

// redeadFrom judges n, the request's letters captured again so far: those
// since the run started, over the items this run confirmed.
func (x *replayRun) redeadFrom(n int) *HaltError {
	st := x.st
	return redeadRatioHalt(st.req.ID, st.req.Stop, n-st.redeadBase, st.confirmedRun)
}
