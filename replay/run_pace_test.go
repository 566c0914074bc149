package replay

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestPacerDecides walks the pacer through samples of one queue, a second
// apart, with a horizon of 2 s: growth over the horizon halves the rate,
// falling acks with work waiting cut it, a cut is given the horizon to show
// before the next, a steady backlog holds the rate, recovery adds a tenth
// of the ceiling back, never past it, stale or unreadable samples change
// nothing, and a live ready count replaces the management API's.
func TestPacerDecides(t *testing.T) {
	t.Parallel()
	limiter := rate.NewLimiter(40, burstFor(40))
	p := &pacer{limiter: limiter, ceiling: 40, floor: 2, rate: 40}
	p.reset(2 * time.Second)
	q := func(ready int64, ack float64) []QueueFlow {
		return []QueueFlow{{Queue: "work", Ready: ready, Consumers: 1, AckRate: ack}}
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name   string
		sample []QueueFlow
		rate   float64
		why    string
	}{
		{"keeping up at the ceiling", q(0, 10), 40, "at the ceiling 40.0/s: work keeping up (ready 0, acks 10.0/s)"},
		{"the same numbers again are no news", q(0, 10), 40, "at the ceiling 40.0/s"},
		{"ready grew over the horizon: halve", q(150, 10), 20, "lowered to 20.0/s: work ready 0 → 150, growing"},
		{"still growing, but the cut has not had time to show", q(200, 10), 20, "holding 20.0/s: giving the last cut time to show; work ready 0 → 200"},
		{"still growing after the horizon: halve again", q(230, 10), 10, "lowered to 10.0/s: work ready 150 → 230, growing"},
		{"growing within the new cut's horizon: hold", q(233, 10), 10, "holding 10.0/s: giving the last cut time to show"},
		{"a steady backlog holds", q(235, 10), 10, "holding 10.0/s: work ready 235, not draining"},
		{"acks fall with work waiting: cut", q(236, 5), 7, "lowered to 7.0/s: work acks 5.0/s, down from 9.5/s, with 236 ready"},
		{"draining: raise by a tenth of the ceiling", q(150, 9), 11, "raising to 11.0/s: work draining (ready 235 → 150, acks 9.0/s)"},
		{"unreadable: hold", []QueueFlow{{Queue: "work", Unavailable: "api down"}}, 11, "holding 11.0/s: the target queue cannot be read (api down)"},
		{"drained", q(0, 9), 15, "raising to 15.0/s"},
		{"grows hard from a low rate", q(600, 9), 7.5, "lowered to 7.5/s: work ready 150 → 600"},
	}
	for _, s := range steps {
		now = now.Add(time.Second)
		p.decide(s.sample, now)
		if !closeTo(p.rate, s.rate) || !strings.HasPrefix(p.why, s.why) {
			t.Fatalf("%s: rate %g (%s), want %g (%s…)", s.name, p.rate, p.why, s.rate, s.why)
		}
		if !closeTo(float64(limiter.Limit()), p.rate) || limiter.Burst() != burstFor(p.rate) {
			t.Fatalf("%s: limiter at %g/%d, want %g/%d", s.name, limiter.Limit(), limiter.Burst(), p.rate, burstFor(p.rate))
		}
	}
	for i := range 30 {
		now = now.Add(time.Second)
		p.decide(q(0, 9+float64(i%2)), now)
		if p.rate > p.ceiling {
			t.Fatalf("recovering: %g above the ceiling", p.rate)
		}
	}
	if p.rate != 40 || !strings.HasPrefix(p.why, "at the ceiling 40.0/s") {
		t.Fatalf("after recovering: %g (%s), want the ceiling and no more", p.rate, p.why)
	}

	// The probe's live count stands in for the management API's lagging one.
	p.observeDepths([]queueDepth{{"work", 400}})
	now = now.Add(time.Second)
	p.decide(q(0, 9), now)
	if p.rate != 20 || !strings.HasPrefix(p.why, "lowered to 20.0/s: work ready 0 → 400, growing") {
		t.Fatalf("with a live count of 400: %g (%s)", p.rate, p.why)
	}

	p.rate, p.cutAt = 1, time.Time{}
	now = now.Add(time.Second)
	p.decide(q(10_000, 1), now)
	if p.rate != 2 {
		t.Fatalf("rate %g, want the floor 2", p.rate)
	}
}

// TestPaceLowersUnderASlowConsumer runs a replay with a ceiling of 40/s
// into a real queue whose one consumer acks 10 messages a second, for 14
// seconds, pacing by the real management API. The rate the run allows
// itself must drop below the ceiling and never rise above it, and what it
// published in any one second must stay within the ceiling and its burst.
func TestPaceLowersUnderASlowConsumer(t *testing.T) {
	t.Parallel()
	if newManagementFlow == nil {
		t.Fatal("management_flow_test.go sets newManagementFlow")
	}
	const ceiling = 40.0
	b := setupRun(t, "max_cohort=800")
	ids := b.seedToQueue(t, 1, 800, 5, b.queue, runEpoch)
	req := b.approved(t, NewRequest{Rate: ceiling, Canary: intPtr(1)}, ids)

	// The slow consumer: one message at a time, 100 ms each.
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(b.queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			time.Sleep(100 * time.Millisecond)
			_ = d.Ack(false)
		}
	}()
	t.Cleanup(func() { _ = ch.Close() })

	runner := b.runner(t)
	var sentMu sync.Mutex
	var sent []time.Time
	timed := &timedBroker{Broker: runner.Broker, mu: &sentMu, times: &sent}
	runner.Broker, runner.Flow, runner.paceEvery = timed, newManagementFlow(), 500*time.Millisecond
	type seen struct {
		at   time.Time
		pace float64
		why  string
	}
	var mu sync.Mutex
	var progress []seen
	runner.Progress = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, seen{time.Now(), p.Pace, p.PaceWhy})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Second)
	defer cancel()
	start := time.Now()
	_, err = runner.Run(ctx, req.ID)
	elapsed := time.Since(start)
	if interrupted, ok := errors.AsType[*InterruptedError](err); !ok {
		t.Fatalf("run = %v, want it interrupted at the deadline: 800 letters at a paced rate take longer than 14 s", err)
	} else if !errors.Is(interrupted, context.DeadlineExceeded) {
		t.Fatalf("run interrupted by %v, want the deadline", interrupted.Err)
	}
	if elapsed < 10*time.Second {
		t.Fatalf("measured over %s, want at least 10 s", elapsed)
	}

	mu.Lock()
	defer mu.Unlock()
	lowest, lowered, last := ceiling, "", ""
	for _, s := range progress {
		if s.why != last {
			t.Logf("%6s pace %.1f/s: %s", s.at.Sub(start).Round(100*time.Millisecond), s.pace, s.why)
			last = s.why
		}
		if s.pace > ceiling {
			t.Fatalf("pace %g/s at %s (%s): above the ceiling %g/s", s.pace, s.at.Sub(start), s.why, ceiling)
		}
		if s.pace < lowest {
			lowest, lowered = s.pace, s.why
		}
	}
	if lowest >= ceiling/2+1e-9 || !strings.HasPrefix(lowered, "lowered to") || !strings.Contains(lowered, b.queue) {
		t.Fatalf("lowest pace %g/s (%s): want the ready count's growth to halve the rate at least once", lowest, lowered)
	}

	sentMu.Lock()
	defer sentMu.Unlock()
	// No window of one second holds more than the ceiling and the burst.
	maxInSecond := 0
	for i, at := range sent {
		n := 0
		for _, later := range sent[i:] {
			if later.Sub(at) >= time.Second {
				break
			}
			n++
		}
		maxInSecond = max(maxInSecond, n)
	}
	if limit := int(ceiling) + burstFor(ceiling); maxInSecond > limit {
		t.Fatalf("%d publishes within one second, above the ceiling and burst %d", maxInSecond, limit)
	}
	// The last 4 s went out well under the ceiling.
	var late int
	for _, at := range sent {
		if at.After(start.Add(elapsed - 4*time.Second)) {
			late++
		}
	}
	overall := float64(len(sent)) / elapsed.Seconds()
	t.Logf("published %d in %s (%.1f/s overall, %.1f/s over the last 4 s, at most %d in a second), lowest pace %.1f/s: %s",
		len(sent), elapsed.Round(time.Millisecond), overall, float64(late)/4, maxInSecond, lowest, lowered)
	if float64(late)/4 > ceiling*0.75 {
		t.Fatalf("%.1f/s over the last 4 s: the paced rate did not hold", float64(late)/4)
	}
}

// TestPaceWithoutManagementKeepsTheCeiling runs without a Flow: the run
// keeps the fixed ceiling and says so.
func TestPaceWithoutManagementKeepsTheCeiling(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ids := b.seedToQueue(t, 1, 5, 5, b.queue, runEpoch)
	req := b.approved(t, NewRequest{Rate: 100, Canary: intPtr(0)}, ids)
	runner := b.runner(t)
	var whys []string
	var paces []float64
	runner.Progress = func(p Progress) { whys, paces = append(whys, p.PaceWhy), append(paces, p.Pace) }
	if _, err := runner.Run(context.Background(), req.ID); err != nil {
		t.Fatal(err)
	}
	if len(whys) == 0 || whys[len(whys)-1] != "fixed ceiling 100/s: no live view to pace by" || paces[len(paces)-1] != 100 {
		t.Fatalf("paces %v, whys %q", paces, whys)
	}
	runDrain(t, b.conn, b.queue, 5, 5*time.Second)
}

// steadyFlow is a work queue whose one consumer acks 10 a second, with a
// little waiting and nothing else arriving.
type steadyFlow struct{}

func (steadyFlow) QueueFlow(_ context.Context, queue string) (QueueFlow, error) {
	return QueueFlow{Queue: WorkQueueOf(queue), Ready: 5, Consumers: 1, DeliverRate: 10, AckRate: 10}, nil
}

// TestRunStartsAtThePlansSuggestion: the plan finds 5/s of headroom (one
// consumer acking 10/s, no live load, two attempts a job) under a ceiling
// of 100/s; the run starts there, says so, and paces from there, never
// above the ceiling.
func TestRunStartsAtThePlansSuggestion(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ids := b.seedN(t, 1, 12)
	req := b.approved(t, NewRequest{Rate: 100, Canary: intPtr(0)}, ids)
	plan, err := b.as("bob").Plan(context.Background(), req.ID, steadyFlow{}, PlanOptions{})
	if err != nil || plan.SuggestedRate == nil || *plan.SuggestedRate != 5 {
		t.Fatalf("plan %+v, %v; want 5/s suggested", plan, err)
	}
	if s := plan.Summary(); !strings.Contains(s, "requested 100/s against suggested 5.00/s") || !strings.Contains(s, "a run starts at 5/s") {
		t.Errorf("summary %q", s)
	}
	r := b.runner(t)
	r.Flow, r.paceEvery = steadyFlow{}, 50*time.Millisecond
	var mu sync.Mutex
	var paces []Progress
	r.Progress = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Phase == "replay" {
			paces = append(paces, p)
		}
	}
	if res, err := r.Run(context.Background(), req.ID); err != nil || res.Confirmed != 12 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(paces) == 0 || paces[0].Pace != 5 || !strings.HasPrefix(paces[0].PaceWhy, "starting at the plan's suggested 5.00/s") {
		t.Fatalf("first pace %+v, want 5/s from the plan", paces)
	}
	for _, p := range paces {
		if p.Pace > 100 {
			t.Errorf("pace %g above the ceiling", p.Pace)
		}
	}
}

// TestPlanWithoutEvidenceSaysSo: with no consumer, or consumers that ack
// nothing while work waits, the plan suggests nothing and says why,
// instead of advising to wait or add consumers.
func TestPlanWithoutEvidenceSaysSo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flow QueueFlow
		want string
	}{
		{QueueFlow{Queue: "work"}, "nothing consumes work, so nothing would process a replay"},
		{QueueFlow{Queue: "work", Consumers: 2, Ready: 40}, "the 2 consumers of work acked nothing while 40 messages waited"},
	} {
		p := Plan{Ceiling: 5, WorkQueue: "work", ArrivalRate: known(0.0), Unavailable: []string{}}
		planHeadroom(&p, &c.flow)
		if p.SuggestedRate != nil || len(p.Unavailable) != 1 || !strings.Contains(p.Unavailable[0], c.want) {
			t.Errorf("%+v: suggested %v, unavailable %q; want none and %q", c.flow, p.SuggestedRate, p.Unavailable, c.want)
		}
		if s := p.Summary(); strings.Contains(s, "add consumers") || !strings.Contains(s, "no suggestion") {
			t.Errorf("summary %q", s)
		}
	}
}
