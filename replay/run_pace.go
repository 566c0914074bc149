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
// consumers of its target queue fall behind (the queue's ready count grows,
// or their ack rate falls with work waiting) and raises it back toward the
// ceiling when they recover. It reads the Runner's Flow on a goroutine of
// its own, so that a slow management API never stalls publishing, and sets
// the run's limiter from the publishing goroutine (adjust). Without a Flow
// the run keeps the ceiling, and the pacer says so.
type pacer struct {
	flow    Flow
	queues  *depthQueues
	limiter *rate.Limiter
	ceiling float64
	floor   float64
	every   time.Duration

	samples chan []QueueFlow
	cancel  context.CancelFunc
	done    chan struct{}

	// The publishing goroutine's own.
	rate    float64
	why     string
	prev    map[string]QueueFlow
	ackBest map[string]float64
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
		floor: math.Min(ceiling, math.Max(ceiling*paceFloorShare, 0.1)), rate: ceiling,
		samples: make(chan []QueueFlow, 1), done: make(chan struct{}), prev: map[string]QueueFlow{}, ackBest: map[string]float64{}}
	if p.flow == nil {
		p.why = fmt.Sprintf("fixed ceiling %g/s: no management API to pace by", ceiling)
		close(p.done)
		return p
	}
	p.why = fmt.Sprintf("at the ceiling %g/s: no reading of the target queue yet", ceiling)
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(context.Background())
	go p.loop(ctx)
	return p
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
	select {
	case flows := <-p.samples:
		p.decide(flows)
	default:
	}
}

// decide moves the rate by one sample of the target queues, the worst
// queue deciding, and sets the limiter.
func (p *pacer) decide(flows []QueueFlow) {
	var lowered, ackLowered, holding, raising []string
	fresh, unavailable := 0, ""
	for _, f := range flows {
		if f.Unavailable != "" {
			unavailable = f.Unavailable
			continue
		}
		prev, seen := p.prev[f.Queue]
		if seen && f == prev {
			// The management plugin refreshes its numbers every few
			// seconds: the same numbers are no news.
			continue
		}
		fresh++
		p.prev[f.Queue] = f
		best := math.Max(f.AckRate, p.ackBest[f.Queue]*paceAckMemory)
		p.ackBest[f.Queue] = best
		tolerance := int64(math.Max(5, p.ceiling/10))
		switch {
		case seen && f.Ready > prev.Ready+tolerance:
			lowered = append(lowered, fmt.Sprintf("%s ready %d → %d, growing", f.Queue, prev.Ready, f.Ready))
		case f.Ready > tolerance && f.AckRate < best*paceAckDrop:
			ackLowered = append(ackLowered, fmt.Sprintf("%s acks %.1f/s, down from %.1f/s, with %d ready", f.Queue, f.AckRate, best, f.Ready))
		case f.Ready > tolerance && !(seen && f.Ready < prev.Ready):
			holding = append(holding, fmt.Sprintf("%s ready %d, not draining", f.Queue, f.Ready))
		default:
			raising = append(raising, fmt.Sprintf("%s keeping up (ready %d, acks %.1f/s)", f.Queue, f.Ready, f.AckRate))
		}
	}
	switch {
	case len(lowered) > 0:
		p.set(p.rate*paceGrowthCut, "lowered to", strings.Join(lowered, "; "))
	case len(ackLowered) > 0:
		p.set(p.rate*paceAckCut, "lowered to", strings.Join(ackLowered, "; "))
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

// set moves the rate to r, within [floor, ceiling], and the limiter with
// it, saying why as "<verb> <rate>/s: <detail>".
func (p *pacer) set(r float64, verb, detail string) {
	p.rate = math.Min(p.ceiling, math.Max(p.floor, r))
	p.why = fmt.Sprintf("%s %.1f/s: %s", verb, p.rate, detail)
	p.limiter.SetLimit(rate.Limit(p.rate))
	p.limiter.SetBurst(burstFor(p.rate))
}
