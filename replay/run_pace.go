package replay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// The pacer's tuning. Decreases are multiplicative and increases additive
// (AIMD, as TCP does): a queue that grows is relieved at once, and the
// rate climbs back over about ten samples, never above the ceiling.
const (
	// paceGrowthCut is the factor a growing ready count cuts the rate by.
	paceGrowthCut = 0.5
	// paceAckCut is the factor falling acks cut it by.
	paceAckCut = 0.7
	// paceAckDrop is how far below the best recent ack rate the consumers
	// must fall, with work waiting, to count as slowed down.
	paceAckDrop = 0.8
	// paceAckMemory is how much of the best ack rate each new sample
	// keeps, so that an old peak is forgotten over a few dozen samples.
	paceAckMemory = 0.95
	// paceStep is the share of the ceiling each recovered sample adds.
	paceStep = 0.1
	// paceFloorShare is the lowest rate as a share of the ceiling: pacing
	// slows a run but never stalls it; the queue-depth stop condition is
	// what halts one.
	paceFloorShare = 0.05
)

// pacer lowers a run's rate below the request's approved ceiling while the
// consumers of its target queue fall behind (the queue's ready count grows
// over the horizon, or their ack rate falls with work waiting) and raises
// it back toward the ceiling when they recover. It reads the Runner's Flow
// on a goroutine of its own, so that a slow live view never stalls
// publishing, and decides on the publishing goroutine (adjust), setting
// the run's limiter. The ready count is the live one the stop conditions'
// probe reads over AMQP when the target queue is the work queue itself,
// since the live view's lags by its sampling interval; the ack
// rate is the live view's. Without a Flow the run keeps the ceiling,
// and the pacer says so.
type pacer struct {
	flow    Flow
	queues  *depthQueues
	limiter *rate.Limiter
	ceiling float64
	floor   float64
	every   time.Duration
	// horizon is how far back the ready count is compared, and how long
	// a cut is given to show before the next.
	horizon time.Duration

	samples chan []QueueFlow
	cancel  context.CancelFunc
	done    chan struct{}

	// The publishing goroutine's own.
	rate    float64
	why     string
	prev    map[string]QueueFlow
	ackBest map[string]float64
	live    map[string]int64
	history map[string][]readyAt
	cutAt   time.Time
}

// readyAt is a queue's ready count at a moment.
type readyAt struct {
	at    time.Time
	ready int64
}

func (r *Runner) paceInterval() time.Duration {
	if r.paceEvery > 0 {
		return r.paceEvery
	}
	return time.Second
}

// newPacer starts pacing limiter, set at the request's ceiling, by the
// consumers of queues; stop ends it.
func newPacer(r *Runner, ceiling float64, queues *depthQueues, limiter *rate.Limiter) *pacer {
	p := &pacer{flow: r.Flow, queues: queues, limiter: limiter, ceiling: ceiling, every: r.paceInterval(),
		floor: paceFloor(ceiling), rate: ceiling,
		samples: make(chan []QueueFlow, 1), done: make(chan struct{})}
	p.reset(2 * p.every)
	if p.flow == nil {
		p.why = fmt.Sprintf("fixed ceiling %g/s: no live view to pace by", ceiling)
		close(p.done)
		return p
	}
	p.why = fmt.Sprintf("at the ceiling %g/s: no reading of the target queue yet", ceiling)
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(context.Background())
	go p.loop(ctx)
	return p
}

// paceFloor is the lowest rate a run of ceiling paces down to.
func paceFloor(ceiling float64) float64 {
	return math.Min(ceiling, math.Max(ceiling*paceFloorShare, 0.1))
}

// startAt has the pacer begin at start rather than the ceiling, saying
// why: a run starts at its plan's suggestion and paces up from there.
func (p *pacer) startAt(start float64, why string) {
	if why == "" || start >= p.ceiling {
		return
	}
	p.rate, p.why = max(start, p.floor), why
	p.limiter.SetLimit(rate.Limit(p.rate))
	p.limiter.SetBurst(burstFor(p.rate))
}

// reset clears what the pacer remembers of the queues and sets its horizon.
func (p *pacer) reset(horizon time.Duration) {
	p.horizon = horizon
	p.prev, p.ackBest, p.live, p.history = map[string]QueueFlow{}, map[string]float64{}, map[string]int64{}, map[string][]readyAt{}
}

// stop ends the reads and waits for the reader.
func (p *pacer) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	<-p.done
}

func (p *pacer) loop(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		if flows := p.read(ctx); flows != nil {
			select {
			case <-p.samples: // an unread older sample is stale now
			default:
			}
			p.samples <- flows
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read reads the flow of each work queue the run fills so far, once each;
// nil when no queue is known yet.
func (p *pacer) read(ctx context.Context) []QueueFlow {
	queues := p.queues.list()
	if len(queues) == 0 {
		return nil
	}
	readCtx, cancel := context.WithTimeout(ctx, max(p.every, 3*time.Second))
	defer cancel()
	var flows []QueueFlow
	seen := map[string]bool{}
	for _, q := range queues {
		f, err := p.flow.QueueFlow(readCtx, q)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f = QueueFlow{Queue: q, Unavailable: err.Error()}
		}
		if !seen[f.Queue] {
			seen[f.Queue] = true
			flows = append(flows, f)
		}
	}
	return flows
}

// adjust takes in the latest sample, if one came, and sets the limiter.
// It never waits.
func (p *pacer) adjust() {
	if p == nil {
		return
	}
	select {
	case flows := <-p.samples:
		p.decide(flows, time.Now())
	default:
	}
}

// observeDepths takes in the live ready counts of the target queues that
// a stop-condition probe read.
func (p *pacer) observeDepths(depths []queueDepth) {
	if p == nil {
		return
	}
	for _, d := range depths {
		p.live[d.queue] = int64(d.depth)
	}
}

// decide moves the rate by one sample of the target queues, the worst
// queue deciding, and sets the limiter.
func (p *pacer) decide(flows []QueueFlow, now time.Time) {
	var lowered, ackLowered, holding, raising []string
	fresh, unavailable := 0, ""
	tolerance := int64(math.Max(5, p.ceiling/10))
	for _, f := range flows {
		if f.Unavailable != "" {
			unavailable = f.Unavailable
			continue
		}
		depth, live := p.live[f.Queue]
		if live {
			f.Ready = depth
		}
		prev, seen := p.prev[f.Queue]
		if seen && !live && f == prev {
			// The management plugin refreshes its numbers every few
			// seconds: the same numbers are no news.
			continue
		}
		fresh++
		p.prev[f.Queue] = f
		before, judged := p.readyBefore(f.Queue, f.Ready, now)
		best := math.Max(f.AckRate, p.ackBest[f.Queue]*paceAckMemory)
		p.ackBest[f.Queue] = best
		switch {
		case judged && f.Ready > before+tolerance:
			lowered = append(lowered, fmt.Sprintf("%s ready %d → %d, growing", f.Queue, before, f.Ready))
		case f.Ready > tolerance && f.AckRate < best*paceAckDrop:
			ackLowered = append(ackLowered, fmt.Sprintf("%s acks %.1f/s, down from %.1f/s, with %d ready", f.Queue, f.AckRate, best, f.Ready))
		case f.Ready > tolerance && !(judged && f.Ready < before):
			holding = append(holding, fmt.Sprintf("%s ready %d, not draining", f.Queue, f.Ready))
		case f.Ready > tolerance:
			raising = append(raising, fmt.Sprintf("%s draining (ready %d → %d, acks %.1f/s)", f.Queue, before, f.Ready, f.AckRate))
		default:
			raising = append(raising, fmt.Sprintf("%s keeping up (ready %d, acks %.1f/s)", f.Queue, f.Ready, f.AckRate))
		}
	}
	// A cut shows in the queue only after a while: until the horizon has
	// passed, the next one would cut on the numbers the last one answered.
	cooling := now.Before(p.cutAt.Add(p.horizon))
	switch {
	case len(lowered)+len(ackLowered) > 0 && cooling:
		p.set(p.rate, "holding", "giving the last cut time to show; "+strings.Join(append(lowered, ackLowered...), "; "))
	case len(lowered) > 0:
		p.set(p.rate*paceGrowthCut, "lowered to", strings.Join(lowered, "; "))
		p.cutAt = now
	case len(ackLowered) > 0:
		p.set(p.rate*paceAckCut, "lowered to", strings.Join(ackLowered, "; "))
		p.cutAt = now
	case len(holding) > 0:
		p.set(p.rate, "holding", strings.Join(holding, "; "))
	case len(raising) > 0 && p.rate < p.ceiling:
		p.set(p.rate+p.ceiling*paceStep, "raising to", strings.Join(raising, "; "))
	case len(raising) > 0:
		p.set(p.ceiling, "at the ceiling", strings.Join(raising, "; "))
	case fresh == 0 && unavailable != "":
		// Blind: neither lower nor raise on no information.
		p.set(p.rate, "holding", "the target queue cannot be read ("+unavailable+")")
	}
}

// readyBefore records queue's ready count now and returns the latest one
// recorded at least the horizon ago; judged is false while there is none.
func (p *pacer) readyBefore(queue string, ready int64, now time.Time) (before int64, judged bool) {
	h := append(p.history[queue], readyAt{now, ready})
	// Keep the newest entry past the horizon and everything after it.
	keep := 0
	for i, e := range h {
		if !e.at.After(now.Add(-p.horizon)) {
			keep, before, judged = i, e.ready, true
		}
	}
	p.history[queue] = h[keep:]
	return before, judged
}

// set moves the rate to r, within [floor, ceiling], and the limiter with
// it, saying why as "<verb> <rate>/s: <detail>".
func (p *pacer) set(r float64, verb, detail string) {
	p.rate = math.Min(p.ceiling, math.Max(p.floor, r))
	p.why = fmt.Sprintf("%s %.1f/s: %s", verb, p.rate, detail)
	p.limiter.SetLimit(rate.Limit(p.rate))
	p.limiter.SetBurst(burstFor(p.rate))
}
