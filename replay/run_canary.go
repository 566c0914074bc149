package replay

import (
	"context"
	"time"
)

// initCanary finds where this approval's canary stands: passed, published
// by an earlier run that died in its window, or still to publish.
func (x *replayRun) initCanary(ctx context.Context) error {
	req := x.st.req
	if req.Canary <= 0 {
		return nil
	}
	t := x.r.tables()
	passed, err := t.CanaryPassed(ctx, req.ID, req.Approvals)
	if err != nil {
		return err
	}
	var started *time.Duration
	if !passed {
		if started, err = t.CanaryStarted(ctx, req.ID, req.Approvals); err != nil {
			return err
		}
	}
	x.st.canaryPassed = passed
	x.canaryTarget, x.canaryWaitFrom = canaryResume(req.Canary, req.CanaryGates(), passed, started)
	return nil
}

// canaryWait waits out the canary window once every canary publish has its
// answer, halting early when the canary's letters die again or fail. waited
// is how much of the window an earlier run already waited (-1: the canary
// was just published by this run).
func (x *replayRun) canaryWait(ctx context.Context, waited time.Duration) *stopReason {
	r, st := x.r, x.st
	req := st.req
	x.drain(30 * time.Second)
	if x.lost != nil {
		return &stopReason{err: x.lost}
	}
	if err := x.rec.sync(); err != nil {
		return &stopReason{err: err}
	}
	if waited < 0 {
		waited = 0
		err := recordCanary(ctx, r, req.ID, false, map[string]any{"published": x.canaryPublished, "confirmed": st.confirmedRun,
			"failed": st.failedRun, "window_seconds": req.Stop.CanaryWindow.Seconds()})
		if err != nil {
			return &stopReason{err: err}
		}
	}
	// A canary sent ahead of its time (a broker's delivery delay) is
	// watched from when its jobs are handed out, not from when the broker
	// took them.
	from := time.Now()
	if x.lastDelivery.After(from) {
		from = x.lastDelivery
	}
	end := from.Add(req.Stop.CanaryWindow - waited)
	tick := time.NewTicker(r.checkInterval())
	defer tick.Stop()
	for {
		st.canaryLeft = max(0, time.Until(end))
		r.report(st, "canary-wait")
		if stop := x.check(true); stop != nil {
			return stop
		}
		verdict, h := judgeCanary(time.Now(), end, req.ID, req.Stop, st.attempted, st.failedRun)
		if verdict != canaryWaiting {
			st.canaryLeft = 0
			if verdict == canaryFailed {
				return &stopReason{halt: h}
			}
			break
		}
		select {
		case <-ctx.Done():
			return &stopReason{err: ctx.Err()}
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
	}
	// The canary passes only once its reservations reached their
	// terminal state (or ran out of outcome window), when an outcome query
	// watches them.
	if stop := x.outcomesSettled(ctx, "canary-outcomes"); stop != nil {
		return stop
	}
	redead, err := r.tables().RunRedeadLettered(ctx, req.ID)
	if err != nil {
		return &stopReason{err: err}
	}
	err = recordCanary(ctx, r, req.ID, true, map[string]any{"confirmed": st.confirmedRun, "failed": st.failedRun,
		"redead": redead - st.redeadBase, "window_seconds": req.Stop.CanaryWindow.Seconds()})
	if err != nil {
		return &stopReason{err: err}
	}
	st.canaryPassed = true
	return nil
}

// recordCanary writes the canary's start or pass: a resumed run trusts
// these rows (a pass skips the canary), so only the request's runner may
// write them.
func recordCanary(ctx context.Context, r *Runner, request int64, passed bool, details map[string]any) error {
	return r.tables().CanaryRecord(ctx, r.Actor, request, passed, details)
}

// The canary is decided by the plain functions below, over the numbers the
// run has counted and the times it has read.

// canaryResume is how a run starts its canary phase, given the request's
// canary size, whether this approval's canary already passed, and, when an
// earlier run published it and died in its window, how long ago that was.
// target is how many items the canary publishes (0: no canary phase);
// waitFrom, when set, is the part of the window already waited: the run
// waits out the rest and publishes no second canary. A canary that gates
// nothing (Request.CanaryGates) is published as the replay, and the watch
// after the last publish looks for its letters coming back.
func canaryResume(size int, gates, passed bool, started *time.Duration) (target int, waitFrom *time.Duration) {
	switch {
	case size <= 0 || passed:
		return 0, nil
	case started != nil:
		return 0, started
	case !gates:
		return 0, nil
	}
	return size, nil
}

// canaryPhase is where the publishing loop stands with the canary.
type canaryPhase int

const (
	// canaryPublishing: no canary phase, or its items are still going out.
	canaryPublishing canaryPhase = iota
	// canaryEmpty: the cohort ran out before a single canary item was
	// published; there is nothing to wait for.
	canaryEmpty
	// canaryOut: the canary is out; wait for its outcome before anything
	// more is published.
	canaryOut
)

// canaryPhaseOf places the loop given the canary's size (target, 0 when
// no canary phase is left), how many of it were published, and whether the
// preparer has no more items to give (drained).
func canaryPhaseOf(target, published int, drained bool) canaryPhase {
	if target <= 0 || (published < target && !drained) {
		return canaryPublishing
	}
	if published == 0 {
		return canaryEmpty
	}
	return canaryOut
}

// canaryAsk is how many items to ask the preparer for during the canary:
// what the canary still lacks beyond the items queued and asked for, at
// most a chunk; 0 or less means ask for nothing more, so that nothing
// beyond the canary is marked publishing while it is judged.
func canaryAsk(target, published, queued, requested, chunk int) int {
	n := target - published - queued - requested
	if n <= 0 {
		return n
	}
	return min(n, chunk)
}

// canaryVerdict is the canary window's answer.
type canaryVerdict int

const (
	canaryWaiting canaryVerdict = iota
	canaryPassed
	canaryFailed
)

// judgeCanary decides the canary at now: waiting until end, the end of its
// window; then failed when its failure ratio is above the stop condition,
// judged with no minimum number of publishes (the canary is small on
// purpose), else passed. The other stop conditions are the checks' while it
// waits.
func judgeCanary(now, end time.Time, request int64, stop StopConditions, attempted, failed int) (canaryVerdict, *HaltError) {
	if now.Before(end) {
		return canaryWaiting, nil
	}
	if h := failureRatioHalt(request, stop, attempted, failed, 1); h != nil {
		return canaryFailed, h
	}
	return canaryPassed, nil
}
