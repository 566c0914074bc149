package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// flight is a published message waiting for its confirm.
type flight struct {
	item      int64
	ordinal   int
	pending   Pending
	republish bool
	// job and published are what the outcome watcher asks about;
	// notBefore is when a delayed message is handed out (Message.NotBefore).
	job       outcomeJob
	published time.Time
	notBefore time.Time
}

// replayRun is the publishing side of one run.
type replayRun struct {
	r       *Runner
	st      *runState
	limiter *rate.Limiter
	chunk   int
	prep    *preparer
	rec     *recorder
	// outstanding counts chunks asked for and not yet taken; requested
	// sums what they asked for.
	outstanding, requested int
	ended                  bool // the preparer sent its last batch or stopped
	queue                  []outgoing
	// cleared counts the items at the head of queue that the database
	// cleared for publishing (see clear); clearing the ones after them in
	// the clearance under way, whose answer comes on clearedC; clearN is
	// how many one clearance covers; sent counts this leg's publishes.
	cleared, clearing, clearN, sent int
	lastSent                        time.Time // this leg's last publish
	clearedC                        chan clearance
	clearStarted                    time.Time // when the clearance under way began
	wasPub                          map[int64]bool
	// unsent are items this run marked publishing but has not published.
	unsent    map[int64]bool
	inflight  []flight
	lost      error
	lostCount int
	depthQs   depthQueues
	lastCheck time.Time
	// The prober reads the stop conditions' numbers off the loop's
	// goroutine, so that a slow server never stalls publishing; probing
	// is true while a probe is outstanding.
	probeReq   chan struct{}
	probeRes   chan probe
	proberDone chan struct{}
	probing    bool
	// handlerMisses counts the checks in a row that could not read the
	// target queues' consumers (see handlerProbed).
	handlerMisses int

	// canaryTarget is how many publishes the canary phase makes (0: no
	// canary phase left); canaryPublished counts them.
	canaryTarget, canaryPublished int
	// lastDelivery is when the last message sent with a delivery delay
	// (Delayer) is to be handed out: the next is paced after it, so that a
	// cohort sent ahead of its time arrives at the approved rate, not at
	// once.
	lastDelivery   time.Time
	canaryWaitFrom *time.Duration // canary already published: time already waited

	// watch asks the policy's outcome query about confirmed items (nil:
	// no query); limits are its window and stop conditions.
	watch  *outcomeWatch
	limits outcomeLimits
}

// burstFor is the limiter's burst: a twentieth of a second's worth, at
// least one, so that no one-second window carries more than rate + burst.
func burstFor(r float64) int {
	return int(math.Max(1, math.Min(math.Ceil(r/20), 1<<20)))
}

// chunkFor is how many items are marked publishing at a time: about a
// second's worth, so that eligibility is judged at most a second or two
// before the publish, and a crash leaves few items publishing-but-unsent.
func chunkFor(r float64) int {
	return int(math.Max(1, math.Min(math.Ceil(r), 1000)))
}

// replay publishes the request's open items: canary, canary window, then
// the rest, checking the stop conditions as it goes.
func (r *Runner) replay(ctx context.Context, st *runState) error {
	req := st.req
	x := &replayRun{r: r, st: st, limiter: rate.NewLimiter(rate.Limit(req.Rate), burstFor(req.Rate)),
		chunk: chunkFor(req.Rate), clearN: clearFor(req.Rate, 0), clearedC: make(chan clearance, 1),
		wasPub: map[int64]bool{}, unsent: map[int64]bool{}}
	if err := x.initCanary(ctx); err != nil {
		return r.interrupt(ctx, st, err, nil, 0)
	}
	x.prep = newPreparer(r, st, x.chunk, &x.depthQs)
	st.pace = newPacer(r, req.Rate, &x.depthQs, x.limiter)
	defer st.pace.stop()
	st.pace.startAt(r.startingPace(ctx, req))
	x.startProber()
	go x.prep.loop()
	x.rec = newRecorder(r, req.ID)
	st.recorder.Store(x.rec)
	x.startOutcomes()
	return x.run(ctx)
}

// startingPace is where the run's pace starts: the plan's suggestion when
// it is below the ceiling (`replay plan`, measured now), else the ceiling
// (why is then ""). Without a live view, or when the plan cannot be
// made, the ceiling stands and the pacer says why.
func (r *Runner) startingPace(ctx context.Context, req Request) (float64, string) {
	if r.Flow == nil {
		return req.Rate, ""
	}
	plan, err := (&Service{Pool: r.Pool, Actor: r.Actor}).plan(ctx, req.ID, r.Flow, PlanOptions{})
	if err != nil {
		return req.Rate, ""
	}
	return plan.StartingPace()
}

// ask requests chunks from the preparer, up to markAhead at a time, while
// no more than a chunk is queued: at most about three chunks (three seconds
// of the rate, or 3,000 items) are marked publishing ahead of the
// publisher, which bounds what a crash leaves marked but unsent.
func (x *replayRun) ask() {
	for x.outstanding < markAhead && !x.ended && len(x.queue) <= x.chunk {
		n := x.chunk
		if x.canaryTarget > 0 {
			if n = canaryAsk(x.canaryTarget, x.canaryPublished, len(x.queue), x.requested, x.chunk); n <= 0 {
				return
			}
		}
		x.prep.want <- n
		x.outstanding++
		x.requested += n
	}
}

// take accepts a prepared batch.
func (x *replayRun) take(b batch) *stopReason {
	x.outstanding--
	x.requested -= b.asked
	st := x.st
	st.skipped += len(b.skipped)
	for _, f := range b.failed {
		st.failed++
		st.failedRun++
		st.attempted++
		st.failedItems = append(st.failedItems, f)
	}
	switch {
	case b.err != nil:
		x.ended = true
		return &stopReason{err: b.err}
	case b.halt != nil:
		x.ended = true
		return &stopReason{halt: b.halt}
	case b.stopped != "":
		x.ended = true
		return &stopReason{stopped: b.stopped}
	case b.last:
		x.ended = true
		return nil
	}
	for _, m := range b.msgs {
		x.queue = append(x.queue, m)
		if b.wasPublishing[m.Item] {
			x.wasPub[m.Item] = true
		} else {
			x.unsent[m.Item] = true
		}
	}
	return nil
}

// settle handles the answer for the oldest flight.
func (x *replayRun) settle() {
	f := x.inflight[0]
	x.inflight = x.inflight[1:]
	st := x.st
	err := f.pending.Outcome()
	var failure *PublishFailure
	var movedOn *JobMovedOnError
	switch {
	case errors.As(err, &movedOn):
		st.skipped++
		x.rec.in <- outcome{id: f.item, ordinal: f.ordinal, skipped: true, why: movedOn.Error(), again: f.republish}
	case err == nil:
		st.confirmed++
		st.confirmedRun++
		st.attempted++
		x.rec.in <- outcome{id: f.item, ordinal: f.ordinal, again: f.republish}
		x.watchConfirmed(f)
	case errors.As(err, &failure):
		st.failed++
		st.failedRun++
		st.attempted++
		st.failedItems = append(st.failedItems, ItemOutcome{DeadLetterID: f.item, State: "failed", Reason: failure.Error()})
		x.rec.in <- outcome{id: f.item, ordinal: f.ordinal, failed: true, why: failure.Error(), again: f.republish}
	default:
		// Channel gone: nobody knows whether it arrived. It stays
		// publishing and goes out again on resume.
		if x.lost == nil {
			x.lost = err
		}
		x.lostCount++
	}
}

// settleReady handles every flight whose answer is in, oldest first.
func (x *replayRun) settleReady() {
	for len(x.inflight) > 0 {
		select {
		case <-x.inflight[0].pending.Done():
			x.settle()
		default:
			return
		}
	}
}

// drain waits for every flight's answer, bounded by timeout.
func (x *replayRun) drain(timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for len(x.inflight) > 0 {
		select {
		case <-x.inflight[0].pending.Done():
			x.settle()
		case <-deadline.C:
			if x.lost == nil {
				x.lost = fmt.Errorf("no confirm from the broker within %s", timeout)
			}
			x.lostCount += len(x.inflight)
			x.inflight = nil
			return
		}
	}
}

// loopState is the publishing loop's own: the ticker of its checks, the
// confirm window, the limiter's answer for the next publish, and the phase
// it reports.
type loopState struct {
	check  *time.Ticker
	window int
	waitC  <-chan time.Time // the limiter's delay before the next publish
	ready  bool             // the limiter allowed the next publish
	phase  string
}

// run is the publishing loop: canary, canary window, then the rest, until
// everything went out or something stops it; then finish settles the
// request.
func (x *replayRun) run(ctx context.Context) error {
	r := x.r
	l := &loopState{check: time.NewTicker(r.checkInterval()), window: r.windowSize(), phase: "replay"}
	defer l.check.Stop()
	if x.canaryTarget > 0 {
		l.phase = "canary"
	}
	if x.canaryWaitFrom != nil {
		if stop := x.canaryWait(ctx, *x.canaryWaitFrom); stop != nil {
			return x.finish(ctx, stop)
		}
	}
	x.ask()
	for {
		if stop, end := x.step(ctx, l); end {
			return x.finish(ctx, stop)
		}
	}
}

// step is one turn of the loop: take in what happened, then publish the
// next message or wait for something to happen. end is set when the loop is
// over, with why (nil: everything went out).
func (x *replayRun) step(ctx context.Context, l *loopState) (stop *stopReason, end bool) {
	if stop := x.observe(l); stop != nil {
		return stop, true
	}
	switch canaryPhaseOf(x.canaryTarget, x.canaryPublished, x.ended && len(x.queue) == 0) {
	case canaryEmpty:
		x.canaryTarget = 0
		return nil, false
	case canaryOut:
		// The canary is out: wait for its outcome before anything more.
		// Nothing beyond the canary was asked for (ask stops at the
		// canary's size), so nothing else waits marked meanwhile.
		if stop := x.canaryWait(ctx, -1); stop != nil {
			return stop, true
		}
		x.canaryTarget, l.phase = 0, "replay"
		x.ask()
		return nil, false
	case canaryPublishing:
	}
	if x.ended && len(x.queue) == 0 && len(x.inflight) == 0 {
		return nil, true
	}
	x.clear()
	canPublish := x.cleared > 0 && len(x.inflight) < l.window
	if canPublish && !l.ready && l.waitC == nil {
		res := x.limiter.Reserve()
		if d := res.Delay(); d <= 0 {
			l.ready = true
		} else {
			l.waitC = time.After(d)
		}
	}
	if canPublish && l.ready {
		stop := x.publishNext(ctx, l)
		return stop, stop != nil
	}
	return x.await(ctx, l)
}

// observe takes in what happened since the last turn without waiting: a
// probe's answer, the broker's answers, a lost channel, a recorder that
// failed; then reports progress.
func (x *replayRun) observe(l *loopState) *stopReason {
	select {
	case p := <-x.probeRes:
		if stop := x.probed(p, l.phase == "canary"); stop != nil {
			return stop
		}
	default:
	}
	select {
	case c := <-x.clearedC:
		if stop := x.takeClearance(c); stop != nil {
			return stop
		}
	default:
	}
	x.settleReady()
	if x.lost != nil {
		return &stopReason{err: x.lost}
	}
	if err := x.recErr(); err != nil {
		return &stopReason{err: err}
	}
	x.st.pace.adjust()
	x.st.inFlight = len(x.inflight)
	x.r.report(x.st, l.phase)
	return nil
}

// publishNext publishes the head of the queue, which this run must have
// marked publishing and the database cleared, and puts it in flight.
func (x *replayRun) publishNext(ctx context.Context, l *loopState) *stopReason {
	r, st := x.r, x.st
	m := x.queue[0]
	if !x.unsent[m.Item] && !x.wasPub[m.Item] {
		return &stopReason{err: fmt.Errorf("item %d was not marked publishing by this run: refusing to publish it", m.Item)}
	}
	if x.cleared == 0 {
		return &stopReason{err: fmt.Errorf("item %d was not cleared for publishing by this run: refusing to publish it", m.Item)}
	}
	sent := time.Now()
	if !m.NotBefore.IsZero() {
		m.NotBefore = x.deliveryAt(m.NotBefore)
	}
	p, err := r.Broker.Publish(ctx, m.Message)
	if err != nil {
		if ctx.Err() != nil {
			return &stopReason{err: ctx.Err()}
		}
		return &stopReason{err: err}
	}
	x.queue = x.queue[1:]
	x.cleared--
	x.sent++
	x.lastSent = sent
	l.ready = false
	republish := x.wasPub[m.Item]
	delete(x.unsent, m.Item)
	delete(x.wasPub, m.Item)
	x.inflight = append(x.inflight, flight{item: m.Item, ordinal: m.ordinal, pending: p, republish: republish, job: m.job, published: sent, notBefore: m.NotBefore})
	st.published++
	if republish {
		st.republished++
	}
	if x.canaryTarget > 0 {
		x.canaryPublished++
		st.canarySent = x.canaryPublished
	}
	x.ask()
	if time.Since(x.lastCheck) >= r.checkInterval() {
		x.requestProbe()
	}
	return nil
}

// deliveryAt is when a message due at notBefore, sent with a delivery
// delay, is to be handed out: at notBefore, or one interval of the rate
// ceiling after the last such message, whichever is later. Sends are held
// to the ceiling, and the database clears an item at most the queue's
// longest delay before its time, so each delivery stays within it of its send
// (but for the limiter's small burst, which the publisher's cap on the
// delay absorbs, never delivering before an item's own time).
func (x *replayRun) deliveryAt(notBefore time.Time) time.Time {
	at := notBefore
	if limit := float64(x.limiter.Limit()); limit > 0 && !x.lastDelivery.IsZero() {
		if next := x.lastDelivery.Add(time.Duration(float64(time.Second) / limit)); next.After(at) {
			at = next
		}
	}
	x.lastDelivery = at
	return at
}

// await waits for the next thing to happen: the oldest flight's answer, a
// prepared batch, the limiter, a check, a probe's answer, or the end of ctx.
func (x *replayRun) await(ctx context.Context, l *loopState) (stop *stopReason, end bool) {
	var headDone <-chan struct{}
	if len(x.inflight) > 0 {
		headDone = x.inflight[0].pending.Done()
	}
	var batchC <-chan batch
	if x.outstanding > 0 {
		batchC = x.prep.out
	}
	var clearC <-chan clearance
	if x.clearing > 0 {
		clearC = x.clearedC
	}
	select {
	case <-ctx.Done():
		return &stopReason{err: ctx.Err()}, true
	case <-headDone:
	case b, ok := <-batchC:
		if !ok {
			x.outstanding, x.requested, x.ended = 0, 0, true
			return nil, false
		}
		if stop := x.take(b); stop != nil {
			return stop, true
		}
		x.ask()
	case c := <-clearC:
		if stop := x.takeClearance(c); stop != nil {
			return stop, true
		}
	case <-l.waitC:
		l.waitC, l.ready = nil, true
	case <-l.check.C:
		x.requestProbe()
	case p := <-x.probeRes:
		if stop := x.probed(p, l.phase == "canary"); stop != nil {
			return stop, true
		}
	}
	return nil, false
}

// recErr reports the recorder's first write error without waiting.
func (x *replayRun) recErr() error {
	select {
	case <-x.rec.failed:
		return x.rec.err
	default:
	}
	return nil
}
