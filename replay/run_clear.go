package replay

import (
	"context"
	"fmt"
	"math"
	"time"
)

// clearFor is how many items one clearance covers: a fiftieth of a
// second's worth, or twice what the last clearance took (took) when the
// database is slower than that, at least one and at most a chunk.
// Clearing in small groups just ahead of the publisher is what keeps the
// count close to the truth: a run that dies leaves only what it cleared
// and had not yet sent counted as sent, three fiftieths of a second's
// worth at most on a healthy server, where counting at the mark counted
// the two or three seconds marked ahead. A clearance is one commit, and
// clear waits for at least half a group, so this is 50 to 100 of them a
// second at any rate up to 50,000/s. On a slow server (a round trip of
// half a second) a fiftieth of a second's worth per round trip would hold
// the publisher to a few items a second: the group grows to cover the
// round trip, counting more in doubt if the run dies, never more than a
// chunk.
func clearFor(r float64, took time.Duration) int {
	span := math.Max(1.0/50, 2*took.Seconds())
	return int(math.Max(1, math.Min(math.Ceil(r*span), float64(chunkFor(r)))))
}

// clearAhead is how many clearances' worth of items may wait cleared for
// the publisher, so that the next clearance commits while it publishes
// these and it never waits on the database.
const clearAhead = 2

// clearLimit is how many items may be cleared and not yet published: at
// most clearAhead clearances' worth, and never more than one past what
// this leg published so far. A leg starts clearing one item and doubles
// as it publishes, a few round trips to full speed; so a run that dies
// soon after it starts, before it sent the items an earlier run left in
// doubt (the first it publishes), has counted a send of hardly any of
// them, and a request whose runs keep dying that way spends the sends of
// the items its runs really did send, not of those queued behind them.
func (x *replayRun) clearLimit() int {
	return min(clearAhead*x.clearN, 1+x.sent)
}

// clearance is the database's answer to one clearance.
type clearance struct {
	stopped Status
	err     error
}

// clearGroup is how many of the queued items the next clearance covers,
// 0 when it should wait: none while limit items wait cleared (cleared of
// queued are), none while none waits uncleared, and none while the group
// would be under half a clearance (clearN, or the limit while a leg
// starts) and the publisher still has cleared items to go on with.
//
// The half is what keeps each commit's fixed cost (the role, the lease,
// the request's lock, the commit itself) spread over hundreds of items at
// full speed: topping up as soon as a clearance returns cleared only what
// the publisher had sent meanwhile, a few dozen items a commit. It moves
// no bound: at most limit items wait cleared either way.
func clearGroup(cleared, queued, limit, clearN int) int {
	if cleared >= limit || queued <= cleared {
		return 0
	}
	n := min(clearN, limit-cleared)
	if cleared > 0 && 2*n < min(clearN, limit) {
		return 0
	}
	return min(n, queued-cleared)
}

// clear clears the next group of queued items for publishing (clearGroup),
// unless one clearance is under way already. The clearance runs on a
// goroutine of its own and its answer comes on clearedC. It does not take
// the run's context, as marking does not: a clearance started is finished,
// never left half known.
func (x *replayRun) clear() {
	if x.clearing > 0 {
		return
	}
	n := clearGroup(x.cleared, len(x.queue), x.clearLimit(), x.clearN)
	if n == 0 {
		return
	}
	group := x.queue[x.cleared : x.cleared+n]
	ids := make([]int64, len(group))
	lo, hi := group[0].ordinal, group[0].ordinal
	for i, m := range group {
		ids[i] = m.Item
		lo, hi = min(lo, m.ordinal), max(hi, m.ordinal)
	}
	x.clearing = len(group)
	x.clearStarted = time.Now()
	r, id := x.r, x.st.req.ID
	// The items of a broker that delays single messages may be cleared
	// before their time: their messages carry the rest of the wait.
	_, delayed := r.Broker.(Delayer)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped, err := r.tables().ItemsSend(ctx, id, lo, hi, ids, delayed)
		x.clearedC <- clearance{stopped: stopped, err: err}
	}()
}

// takeClearance takes the answer to the clearance under way: its items may
// go out, or the run stops (the request stopped running, an item was spent,
// the database failed).
func (x *replayRun) takeClearance(c clearance) *stopReason {
	n := x.clearing
	x.clearing = 0
	x.clearN = clearFor(x.st.req.Rate, time.Since(x.clearStarted))
	switch {
	case c.err != nil:
		return &stopReason{err: fmt.Errorf("clear items of replay request %d for publishing: %w", x.st.req.ID, c.err)}
	case c.stopped != "":
		return &stopReason{stopped: c.stopped}
	}
	x.cleared += n
	return nil
}

// clearanceDone waits out a clearance still under way when the loop ends,
// so that nothing writes to the database behind the run's last word. Its
// items are unsent whatever it answers.
func (x *replayRun) clearanceDone() {
	if x.clearing > 0 {
		<-x.clearedC
		x.clearing = 0
	}
}
