package replay

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// outgoing is a message with its item's ordinal, which lets the recorder
// find the item by the (request, ordinal) index.
type outgoing struct {
	Message
	ordinal int
	job     outcomeJob
}

// batch is one chunk of items marked publishing, ready to go out.
type batch struct {
	msgs []outgoing
	// wasPublishing marks items an earlier run had already marked
	// publishing (and may have sent).
	wasPublishing map[int64]bool
	skipped       []ItemOutcome
	failed        []ItemOutcome
	last          bool
	halt          *HaltError
	stopped       Status
	err           error
	// asked is the n this batch answers.
	asked int
}

// preparer turns the request's open items into batches marked publishing,
// ahead of the publisher, in two stages on goroutines of their own: a
// planner reads windows of items and builds their messages (the costly
// decoding), one window ahead; the marker, when the publisher asks for n,
// runs the eligibility query on the next n publishable items and marks them
// publishing in one transaction. Eligibility is judged at marking, so a
// canary window spent waiting never leaves a stale answer behind. The
// preparer's database work does not take the run's context: a chunk being
// marked is finished, never left half known.
type preparer struct {
	r         *Runner
	st        *runState
	elig      eligibility
	exchanges map[string]bool
	window    int
	queues    *depthQueues
	want      chan int
	out       chan batch

	planned chan planned
	stop    chan struct{}
	pending []plan
	drained bool
	// quit ends a wait for an item not yet due (see hold): the run is
	// stopping.
	quit chan struct{}
}

// markAhead is how many chunks may be asked for (and be being marked, in
// concurrent transactions) ahead of the publisher.
const markAhead = 2

func newPreparer(r *Runner, st *runState, window int, queues *depthQueues) *preparer {
	return &preparer{r: r, st: st, elig: newEligibility(st.pol.EligibilityQuery), exchanges: map[string]bool{}, window: window, queues: queues,
		want: make(chan int, markAhead), out: make(chan batch, markAhead), planned: make(chan planned, 1), stop: make(chan struct{}),
		quit: make(chan struct{})}
}

func (p *preparer) loop() {
	defer close(p.out)
	planning := make(chan struct{})
	go func() {
		defer close(planning)
		p.plan()
	}()
	defer func() {
		close(p.stop)
		<-planning
	}()
	// Chunks are chosen in order here, then marked concurrently (up to
	// markAhead), and their batches go out in the order they were asked for.
	order := make(chan chan batch, markAhead)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		for rc := range order {
			p.out <- <-rc
		}
	}()
	defer func() {
		close(order)
		<-delivered
	}()
	done := false
	for n := range p.want {
		rc := make(chan batch, 1)
		order <- rc
		if done {
			rc <- batch{last: true, asked: n}
			continue
		}
		plans, b, final := p.choose(n)
		if final {
			b.asked = n
			rc <- b
			done = true
			continue
		}
		go func() {
			b := p.mark(plans)
			b.asked = n
			rc <- b
		}()
	}
}

// choose takes the next plans holding up to n publishable items (with the
// skipped and failed ones among them). final is set, with the batch to
// send, when there is nothing left or the planner failed.
func (p *preparer) choose(n int) ([]plan, batch, bool) {
	replays := func() int {
		c := 0
		for _, pl := range p.pending {
			if pl.action == actionReplay {
				c++
			}
		}
		return c
	}
	for !p.drained && replays() < n {
		w := <-p.planned
		if w.err != nil {
			return nil, batch{err: w.err}, true
		}
		p.pending = append(p.pending, w.plans...)
		p.drained = w.last
	}
	// The prefix of pending with n replays, and whatever else lies in it,
	// up to the first replay not yet due: items go out in their order.
	for {
		take, seen := 0, 0
		for take < len(p.pending) && seen < n {
			if p.pending[take].action == actionReplay {
				if from := p.pending[take].item.sendFrom(); !from.IsZero() && time.Until(from) > 0 {
					break
				}
				seen++
			}
			take++
		}
		if take == 0 && len(p.pending) > 0 {
			if !p.hold(p.pending[0].item.sendFrom()) {
				return nil, batch{last: true}, true
			}
			continue
		}
		if take == 0 {
			return nil, batch{last: true}, true
		}
		plans := p.pending[:take:take]
		p.pending = p.pending[take:]
		return plans, batch{}, false
	}
}

// hold waits until the item at the head of the run may go (its request's
// --not-before, its letter's Retry-After, its hold's deadline), the run
// reporting what it waits for meanwhile; false when the run stopped
// instead. Nothing is marked publishing while it waits, so eligibility is
// judged when the item goes, not when the run began.
func (p *preparer) hold(until time.Time) bool {
	p.st.holdUntil.Store(until.UnixNano())
	defer p.st.holdUntil.Store(0)
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.quit:
		return false
	}
}

// mark judges the eligibility of the chosen plans' publishable items and
// commits every item's state: skipped, failed, or publishing.
func (p *preparer) mark(plans []plan) batch {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := p.st.req
	var candidates []*runItem
	for _, pl := range plans {
		if pl.action == actionReplay {
			candidates = append(candidates, pl.item)
		}
	}
	ineligible, err := p.elig.checkAll(ctx, p.r.reservationsPool(), candidates)
	var eligErr *EligibilityError
	if errors.As(err, &eligErr) {
		return batch{halt: &HaltError{RequestID: req.ID, Condition: ConditionEligibility, Reason: eligErr.Error()}}
	}
	if err != nil {
		return batch{err: err}
	}
	b, marks := decide(plans, ineligible)
	stopped, err := p.r.tables().ItemsMark(ctx, req.ID, marks)
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal) && refusal.Rule == "approved-to-run":
		return batch{stopped: StatusCancelled}
	case err != nil:
		return batch{err: fmt.Errorf("mark items of replay request %d publishing: %w", req.ID, err)}
	case stopped != "":
		return batch{stopped: stopped}
	}
	return b
}

// decide sorts the chosen plans, with the ineligible among them skipped,
// into the batch to publish and the window's decisions to commit.
func decide(plans []plan, ineligible map[int64]string) (batch, itemMarks) {
	b := batch{wasPublishing: map[int64]bool{}}
	m := itemMarks{lo: plans[0].item.ordinal, hi: plans[len(plans)-1].item.ordinal}
	for _, pl := range plans {
		if why, no := ineligible[pl.item.id]; no {
			pl.action, pl.reason = actionSkip, why
		}
		switch pl.action {
		case actionReplay:
			b.msgs = append(b.msgs, outgoing{Message: pl.msg, ordinal: pl.item.ordinal, job: outcomeJobOf(pl)})
			m.publish = append(m.publish, pl.item.id)
			if pl.item.state == "publishing" {
				b.wasPublishing[pl.item.id] = true
			}
		case actionFail:
			m.fail, m.failWhy = append(m.fail, pl.item.id), append(m.failWhy, pl.reason)
			b.failed = append(b.failed, ItemOutcome{DeadLetterID: pl.item.id, State: "failed", Reason: pl.reason})
		default:
			why := pl.reason
			if pl.action == actionBlock {
				why = "blocked: " + why
			}
			m.skip, m.skipWhy = append(m.skip, pl.item.id), append(m.skipWhy, why)
			b.skipped = append(b.skipped, ItemOutcome{DeadLetterID: pl.item.id, State: "skipped", Reason: why})
		}
	}
	return b, m
}
