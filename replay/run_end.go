package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/expiryctl/expiryctl/audit"
)

// stopReason is why the publishing loop stops early.
type stopReason struct {
	halt    *HaltError
	stopped Status
	err     error
}

// finish stops the pipeline and settles the request: completed, halted, or
// left running for a resume.
func (x *replayRun) finish(ctx context.Context, stop *stopReason) error {
	r, st := x.r, x.st
	r.report(st, "stopping")
	// Nothing more goes out; what is in flight gets its answer.
	x.clearanceDone()
	x.drain(30 * time.Second)
	if stop == nil {
		// Everything went out: the run ends once every outcome is known
		// (or its window passed), and is judged on them.
		stop = x.outcomesSettled(ctx, "settling")
	}
	if stop == nil {
		stop = x.watchAfter(ctx)
	}
	x.stopProber()
	x.closePreparer()
	recErr := x.rec.close()
	unsent := make([]int64, 0, len(x.unsent))
	for id := range x.unsent {
		unsent = append(unsent, id)
	}
	stop = endReason(stop, x.lost, recErr)
	// A lost broker with every answer recorded can fail over; the outcome
	// watcher then goes on in the next leg, since the outcomes of the items
	// it watches are still to come.
	failover := stop != nil && stop.err != nil && recErr == nil && r.canFailover(st, stop.err)
	if !failover {
		x.stopOutcomes()
	}

	switch {
	case stop != nil && stop.stopped != "":
		x.recordUnrecorded(ctx)
		return r.stopped(ctx, st, stop.stopped)
	case stop != nil && stop.halt != nil:
		return r.halt(ctx, st, stop.halt, unsent, nil)
	case failover:
		return &brokerLoss{cause: stop.err, unsent: unsent, inFlight: x.lostCount, node: nodeOf(r.Broker)}
	case stop != nil && stop.err != nil:
		return r.interruptInDoubt(ctx, st, stop.err, unsent, x.inDoubt())
	}
	// Everything is out: a last look at the stop conditions, with no
	// minimum number of publishes, then done.
	if h := x.failureHalt(1); h != nil {
		return r.halt(ctx, st, h, nil, nil)
	}
	if h, err := x.redeadHalt(ctx); err != nil {
		return r.interrupt(ctx, st, err, nil, 0)
	} else if h != nil {
		return r.halt(ctx, st, h, nil, nil)
	}
	return r.complete(ctx, st)
}

// watchAfter keeps watching for the cohort's letters coming back for the
// canary window after the run's last publish, as the canary does for its
// own: a job dies again only after the worker tried it, so the last ones
// out come back after the loop ended. A run completes only once that
// window passed with the re-dead ratio under its stop condition, or once
// the outcome query saw every reservation the run confirmed reach its
// terminal state: a job whose work is done is not coming back. A leg
// that published nothing, resumed after its predecessor's last publish,
// watches out what is left of that one's window.
func (x *replayRun) watchAfter(ctx context.Context) *stopReason {
	r, st := x.r, x.st
	end := st.owedUntil
	if x.sent > 0 {
		end = x.lastSent.Add(st.req.Stop.CanaryWindow)
	}
	tick := time.NewTicker(r.checkInterval())
	defer tick.Stop()
	for !end.IsZero() {
		left := time.Until(end)
		st.canaryLeft = max(left, 0)
		r.report(st, "watching")
		if h, err := x.redeadHalt(ctx); err != nil {
			return &stopReason{err: err}
		} else if h != nil {
			return &stopReason{halt: h}
		}
		if left <= 0 || x.everyOutcomeTerminal() {
			break
		}
		select {
		case <-ctx.Done():
			return &stopReason{err: ctx.Err()}
		case <-tick.C:
		case <-time.After(left):
		}
	}
	st.canaryLeft = 0
	return nil
}

// everyOutcomeTerminal says whether an outcome query watches the run's
// confirmed items and saw each of them reach its terminal state.
func (x *replayRun) everyOutcomeTerminal() bool {
	if x.watch == nil {
		return false
	}
	s, err := x.watch.snapshot()
	return err == nil && s.Watched > 0 && s.Terminal == s.Watched
}

// closePreparer stops the preparer and takes the batches it still sends:
// their items marked publishing are unsent, and their skips and failures
// are committed, so they are counted.
func (x *replayRun) closePreparer() {
	st := x.st
	close(x.prep.quit)
	close(x.prep.want)
	for b := range x.prep.out {
		if b.err == nil && b.halt == nil && b.stopped == "" && !b.last {
			for _, m := range b.msgs {
				if !b.wasPublishing[m.Item] {
					x.unsent[m.Item] = true
				}
			}
			st.skipped += len(b.skipped)
			for _, f := range b.failed {
				st.failed++
				st.failedItems = append(st.failedItems, f)
			}
		}
	}
}

// endReason is why a run ends, given why its loop stopped (nil: everything
// went out), the loss of a broker answer, and the recorder's error. A lost
// answer counts only when nothing else stopped the run. A recorder the
// database refused means the request stopped running under it: a cancel,
// whatever else happened. Any other recorder error replaces every reason but
// an earlier error: a run cannot halt or complete on answers it could not
// record.
func endReason(stop *stopReason, lost, recErr error) *stopReason {
	if stop == nil && lost != nil {
		stop = &stopReason{err: lost}
	}
	var refusal *Refusal
	if recErr != nil && errors.As(recErr, &refusal) {
		return &stopReason{stopped: StatusCancelled}
	} else if recErr != nil && (stop == nil || stop.err == nil) {
		return &stopReason{err: recErr}
	}
	return stop
}

// recordUnrecorded handles items the broker acked after the request was
// cancelled under the runner: the database no longer lets them be marked
// confirmed, but their letters were replayed, and the trail must say so.
func (x *replayRun) recordUnrecorded(ctx context.Context) {
	var acked []int64
	for _, o := range x.rec.unrecorded {
		if !o.failed {
			acked = append(acked, o.id)
		}
	}
	if len(acked) == 0 {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = x.r.tables().RunAckedAfterCancel(bg, x.r.Actor, x.st.req.ID, acked)
}

// inDoubt is what a run leaves publishing with no answer recorded: the
// items the next run publishes again.
type inDoubt struct {
	// unconfirmed got no answer from the broker; unrecorded were acked,
	// unanswered nacked or returned, and neither could be recorded.
	unconfirmed, unrecorded, unanswered int
}

// inDoubt counts the flights lost and the answers the recorder could not
// write: read after the recorder closed.
func (x *replayRun) inDoubt() inDoubt {
	d := inDoubt{unconfirmed: x.lostCount}
	for _, o := range x.rec.unrecorded {
		if o.failed {
			d.unanswered++
		} else {
			d.unrecorded++
		}
	}
	return d
}

// interrupt records a run that stops without a status change: the request
// stays running for the next run to resume. Items this run marked
// publishing but never published go back to pending.
func (r *Runner) interrupt(ctx context.Context, st *runState, cause error, unsent []int64, unconfirmed int) error {
	return r.interruptInDoubt(ctx, st, cause, unsent, inDoubt{unconfirmed: unconfirmed})
}

// interruptInDoubt is interrupt with everything the run leaves in doubt.
// When PostgreSQL is gone the row cannot be written, nor the unsent items
// put back: the error then counts them among what the next run sends.
func (r *Runner) interruptInDoubt(ctx context.Context, st *runState, cause error, unsent []int64, d inDoubt) error {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	details := map[string]any{"error": audit.ErrorText(cause), "published": st.published,
		"republished": st.republished, "unconfirmed": d.unconfirmed, "unrecorded": d.unrecorded + d.unanswered,
		"confirmed": st.confirmed, "skipped": st.skipped, "failed": st.failed}
	if len(st.failovers) > 0 {
		details["failovers"] = len(st.failovers)
	}
	e := &InterruptedError{RequestID: st.req.ID, Unconfirmed: d.unconfirmed, Unrecorded: d.unrecorded, Unanswered: d.unanswered, Err: cause}
	if err := r.tables().RunInterrupted(bg, r.Actor, st.req.ID, unsent, details); err != nil {
		e.Unsent = len(unsent)
	}
	return e
}

// stopped handles a request whose status changed under the runner: only a
// cancel can do that (a halt or completion is the runner's own).
func (r *Runner) stopped(ctx context.Context, st *runState, status Status) error {
	_, reason, _ := r.tables().RequestStatus(context.WithoutCancel(ctx), st.req.ID)
	st.status = status
	if reason == "" {
		reason = "status " + string(status)
	}
	st.haltCondition, st.haltReason = ConditionCancelled, reason
	return &HaltError{RequestID: st.req.ID, Condition: ConditionCancelled, Reason: reason}
}

// halt marks the request halted with why, after reverting items marked
// publishing that were never published.
func (r *Runner) halt(ctx context.Context, st *runState, h *HaltError, unsent []int64, details map[string]any) error {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if details == nil {
		details = map[string]any{}
	}
	details["condition"], details["reason"] = h.Condition, h.Reason
	details["confirmed"], details["skipped"], details["failed"] = st.confirmed, st.skipped, st.failed
	details["published"], details["attempted_this_run"], details["failed_this_run"] = st.published, st.attempted, st.failedRun
	details["stop_conditions"] = st.req.Stop
	st.outcomeDetails(details)
	if h.consumers != nil {
		details["consumers"] = h.consumers
	}
	stoppedAs, err := r.tables().RunHalt(bg, r.Actor, st.req.ID, h.Condition+": "+h.Reason, unsent, details)
	if err != nil {
		return r.interrupt(ctx, st, fmt.Errorf("halting on %s failed: %w", h.Condition, err), unsent, 0)
	}
	if stoppedAs != "" {
		return r.stopped(ctx, st, stoppedAs)
	}
	st.status, st.haltCondition, st.haltReason = StatusHalted, h.Condition, h.Condition+": "+h.Reason
	return h
}

// complete marks the request completed once no item is left to publish and
// audits every item's outcome.
func (r *Runner) complete(ctx context.Context, st *runState) error {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	var stoppedAs Status
	err := inTx(bg, r.Pool, func(t tables) error {
		var err error
		stoppedAs, err = t.RunComplete(bg, r.Actor, st.req.ID, st.outcomeDetails(map[string]any{
			"kind": st.req.Kind, "published": st.published, "republished": st.republished, "resumed": st.resumed,
			"elapsed_seconds": math.Round(r.now().Sub(st.start).Seconds()*1000) / 1000}))
		if err != nil || stoppedAs != "" {
			return err
		}
		outcomes, err := t.ItemsNotConfirmed(bg, st.req.ID)
		if err != nil {
			return err
		}
		total, err := t.ItemsCount(bg, st.req.ID)
		if err != nil {
			return err
		}
		st.confirmed = total - len(outcomes)
		st.skipped, st.failedItems = skippedAndFailed(outcomes)
		st.failed = len(st.failedItems)
		return nil
	})
	if err != nil {
		return r.interrupt(ctx, st, fmt.Errorf("completing failed: %w", err), nil, 0)
	}
	if stoppedAs != "" {
		return r.stopped(ctx, st, stoppedAs)
	}
	st.status = StatusCompleted
	return nil
}

// skippedAndFailed counts the skipped outcomes and lists the failed ones.
func skippedAndFailed(outcomes []ItemOutcome) (int, []ItemOutcome) {
	failed := []ItemOutcome{}
	skipped := 0
	for _, o := range outcomes {
		if o.State == "failed" {
			failed = append(failed, o)
		} else {
			skipped++
		}
	}
	return skipped, failed
}
