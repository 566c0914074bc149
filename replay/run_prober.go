package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// maxDepthQueues bounds the queues whose depth each check reads.
const maxDepthQueues = 20

// depthQueues collects the depth queues of the items as the planner reads
// them, so that every item's queue is known before the item is published,
// without a pass over the whole cohort before the first publish. The
// planner adds, the prober reads.
type depthQueues struct {
	mu     sync.Mutex
	queues []string
}

func (d *depthQueues) add(q string) {
	if q == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queues) >= maxDepthQueues || slices.Contains(d.queues, q) {
		return
	}
	d.queues = append(d.queues, q)
}

func (d *depthQueues) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.queues)
}

// probe is what one check reads from the servers: whether the request
// still runs (through the lock session, which also shows the session still
// stands), the depth of the target queues and how many of the request's
// letters were captured again.
type probe struct {
	status Status
	depths []queueDepth
	redead int
	// consumers is what the target queues' consumers are now, when the
	// run checks the handler (see handler.go); nil otherwise.
	consumers *Observation
	err       error
}

type queueDepth struct {
	queue string
	depth int
}

func (x *replayRun) startProber() {
	x.probeReq, x.probeRes, x.proberDone = make(chan struct{}), make(chan probe, 1), make(chan struct{})
	go func() {
		defer close(x.proberDone)
		for range x.probeReq {
			x.probeRes <- x.probeOnce()
		}
	}()
}

// stopProber waits for an outstanding probe and ends the prober, so that
// nothing uses the lock session once the run lets it go.
func (x *replayRun) stopProber() {
	if x.probeReq == nil {
		return
	}
	if x.probing {
		<-x.probeRes
		x.probing = false
	}
	close(x.probeReq)
	<-x.proberDone
	x.probeReq = nil
}

func (x *replayRun) probeOnce() probe {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p probe
	if p.status, _, p.err = x.st.lock.status(ctx); p.err != nil || p.status != StatusRunning {
		return p
	}
	for _, q := range x.depthQs.list() {
		depth, exists, err := x.r.Broker.QueueDepth(ctx, q)
		if err != nil {
			p.err = fmt.Errorf("inspect the depth of queue %s: %w", q, err)
			return p
		}
		if exists {
			p.depths = append(p.depths, queueDepth{q, depth})
		}
	}
	if p.redead, p.err = x.r.tables().RunRedeadLettered(ctx, x.st.req.ID); p.err != nil {
		return p
	}
	if p.err = x.st.dlqs.failed(); p.err != nil {
		return p
	}
	if x.checksHandler() {
		obs := x.r.observe(ctx, x.st.req)
		p.consumers = &obs
	}
	return p
}

// requestProbe starts a probe unless one is outstanding.
func (x *replayRun) requestProbe() {
	if !x.probing {
		x.probeReq <- struct{}{}
		x.probing = true
	}
}

// check probes now, waiting for the answer, and judges it.
func (x *replayRun) check(canary bool) *stopReason {
	if x.probing {
		<-x.probeRes
		x.probing = false
	}
	x.requestProbe()
	p := <-x.probeRes
	return x.probed(p, canary)
}

// probed judges a probe's numbers, with this run's publish counts, against
// the stop conditions.
func (x *replayRun) probed(p probe, canary bool) *stopReason {
	r, st := x.r, x.st
	x.probing = false
	x.lastCheck = time.Now()
	st.readProbe(p)
	if p.err != nil {
		return &stopReason{err: p.err}
	}
	if p.status != StatusRunning {
		return &stopReason{stopped: p.status}
	}
	st.pace.observeDepths(p.depths)
	req := st.req
	minAttempts := failureMinimum(r.minFailureAttempts(), req.Canary, canary)
	if h := probeHalt(req.ID, req.Stop, st.attempted, st.failedRun, minAttempts, p.depths, p.redead-st.redeadBase, st.confirmedRun); h != nil {
		return &stopReason{halt: h}
	}
	if stop := x.handlerProbed(p.consumers); stop != nil {
		return stop
	}
	return x.outcomeCheck(minAttempts)
}
