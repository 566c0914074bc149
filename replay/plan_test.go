package replay

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// seededFlow is a Flow that reports fixed traffic: the rates R and p are
// the test's seeds, so that the plan's arithmetic over them can be checked
// by hand. What it is asked for is recorded.
type seededFlow struct {
	mu     sync.Mutex
	flow   QueueFlow
	asked  []string
	answer func(queue string) QueueFlow
}

func (f *seededFlow) QueueFlow(_ context.Context, queue string) (QueueFlow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, queue)
	if f.answer != nil {
		return f.answer(queue), nil
	}
	out := f.flow
	out.Queue = queue
	return out, nil
}

// attemptHistory is n worker attempts, as x-attempt-history carries them.
func attemptHistory(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = amqp.Table{"at": runEpoch.Add(time.Duration(i) * time.Second), "error_class": "db_timeout", "error": "dial tcp: i/o timeout"}
	}
	return out
}

// seedToQueue archives n letters that died in queue after attempts
// attempts each (so that a replay publishes them back to queue by name),
// dead-lettered at at.
func (b *runBundle) seedToQueue(t *testing.T, first, n, attempts int, queue string, at time.Time) []int64 {
	t.Helper()
	msgs := make([]deadletter.Message, n)
	for i := range msgs {
		msgs[i] = runLetter(first+i, runLetterOpts{originQueue: queue, extra: amqp.Table{"x-attempt-history": attemptHistory(attempts)}})
		msgs[i].Timestamp = at
	}
	return b.seed(t, msgs...)
}

func TestPlanAgainstHandComputedValues(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	// Three letters after 5 attempts, one after 2: n = 5 − 1 = 4.
	ids := append(b.seedToQueue(t, 1, 3, 5, b.queue, runEpoch), b.seedToQueue(t, 10, 1, 2, b.queue, runEpoch)...)
	req := b.pending(t, NewRequest{Rate: 20}, ids)
	// R = 12/s published; 15 deliveries/s of which 3 went to the retry
	// queues: p = 0.2; 3 consumers ack 30/s.
	flow := &seededFlow{flow: QueueFlow{Ready: 40, Consumers: 3, PublishRate: 12, DeliverRate: 15, AckRate: 30, RetryPublishRate: 3, RetryQueues: 2}}

	p, err := b.as("alice").Plan(ctx, req.ID, flow, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(flow.asked) != 1 || flow.asked[0] != b.queue || p.WorkQueue != b.queue || len(p.TargetQueues) != 1 || p.TargetQueues[0] != b.queue {
		t.Fatalf("asked %v, planned %q of %v: the cohort's queue is %s", flow.asked, p.WorkQueue, p.TargetQueues, b.queue)
	}
	// By hand: amplification 1 + .2 + .04 + .008 + .0016 = 1.2496;
	// upper 12·5 = 60; planning 12·1.2496 = 14.9952; suggested
	// 30/1.2496 − 12 = 12.0077 → 12.00, under the ceiling 20; offered
	// at it (12+12)·5 = 120 at most, 24·1.2496 = 29.9904 planned.
	checks := []struct {
		name      string
		got, want *float64
	}{
		{"arrival_rate", p.ArrivalRate, known(12.0)}, {"failure_fraction", p.FailureFraction, known(0.2)},
		{"upper_bound", p.UpperBound, known(60.0)}, {"planning_bound", p.PlanningBound, known(14.9952)},
		{"ack_rate", p.AckRate, known(30.0)}, {"suggested_rate", p.SuggestedRate, known(12.0)},
		{"suggested_upper_bound", p.SuggestedUpperBound, known(120.0)}, {"suggested_planning_bound", p.SuggestedPlanningBound, known(29.9904)},
		{"amplification", &p.Amplification, known(1.2496)},
	}
	for _, c := range checks {
		if c.got == nil || !closeTo(*c.got, *c.want) {
			t.Errorf("%s = %v, want %g", c.name, deref(c.got), *c.want)
		}
	}
	if p.Attempts != 4 || !strings.Contains(p.AttemptsSource, "(5)") || p.LimitedBy != LimitedByHeadroom || p.Ceiling != 20 || len(p.Unavailable) != 0 {
		t.Errorf("plan %+v", p)
	}
	if n := b.count(t, `SELECT count(*)::int FROM expiryctl.audit_log WHERE action = 'replay.plan' AND target = $1 AND actor = 'alice'
		AND (details->>'suggested_rate')::float = 12`, requestTarget(req.ID)); n != 1 {
		t.Errorf("%d replay.plan audit rows, want 1", n)
	}

	t.Run("given figures replace the measurements", func(t *testing.T) {
		r, pf, n := 0.0, 0.5, 3
		p, err := b.as("alice").Plan(ctx, req.ID, flow, PlanOptions{ArrivalRate: &r, FailureFraction: &pf, Retries: &n})
		if err != nil {
			t.Fatal(err)
		}
		// 1 + .5 + .25 + .125 = 1.875; 30/1.875 = 16 ≤ 20: 16.
		if !closeTo(p.Amplification, 1.875) || *p.UpperBound != 0 || *p.PlanningBound != 0 || *p.SuggestedRate != 16 ||
			p.Attempts != 3 || !strings.HasPrefix(p.ArrivalRateSource, "given") || !strings.HasPrefix(p.FailureSource, "given") {
			t.Fatalf("plan %+v", p)
		}
	})
	t.Run("the ceiling bounds the suggestion", func(t *testing.T) {
		generous := &seededFlow{flow: flow.flow}
		generous.flow.AckRate = 1000
		p, err := b.as("alice").Plan(ctx, req.ID, generous, PlanOptions{})
		if err != nil || *p.SuggestedRate != 20 || p.LimitedBy != LimitedByCeiling {
			t.Fatalf("plan %+v, %v", p, err)
		}
	})
	t.Run("no headroom suggests nothing", func(t *testing.T) {
		busy := &seededFlow{flow: flow.flow}
		busy.flow.AckRate = 14 // 14/1.2496 = 11.2 < 12 arriving
		p, err := b.as("alice").Plan(ctx, req.ID, busy, PlanOptions{})
		if err != nil || *p.SuggestedRate != 0 || p.LimitedBy != LimitedByNoHeadroom || !strings.HasPrefix(p.Summary(), "requested 20/s against suggested 0/s") ||
			!strings.Contains(p.Summary(), "a run starts at its floor 1/s") {
			t.Fatalf("plan %+v, %v", p, err)
		}
	})
	t.Run("without retry queues p is unknown and the upper bound is planned for", func(t *testing.T) {
		bare := &seededFlow{flow: flow.flow}
		bare.flow.RetryQueues, bare.flow.RetryPublishRate = 0, 0
		p, err := b.as("alice").Plan(ctx, req.ID, bare, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// amplification 1+n = 5: 30/5 − 12 = −6: no headroom.
		if p.FailureFraction != nil || p.PlanningBound != nil || p.Amplification != 5 || *p.SuggestedRate != 0 ||
			!hasPrefixIn(p.Unavailable, "failure_fraction: ") || !hasPrefixIn(p.Unavailable, "planning_bound: ") {
			t.Fatalf("plan %+v", p)
		}
	})
	t.Run("idle consumers: no suggestion", func(t *testing.T) {
		idle := &seededFlow{flow: QueueFlow{Consumers: 2, RetryQueues: 1}}
		p, err := b.as("alice").Plan(ctx, req.ID, idle, PlanOptions{})
		if err != nil || p.SuggestedRate != nil || !hasPrefixIn(p.Unavailable, "suggested_rate: the 2 consumers") {
			t.Fatalf("plan %+v, %v", p, err)
		}
	})
	t.Run("an unreadable management API: R from the archive, no suggestion", func(t *testing.T) {
		// Five letters dead-lettered a minute ago: 5 in the last 5 minutes.
		b.seedToQueue(t, 100, 5, 1, b.queue, time.Now().Add(-time.Minute))
		down := &seededFlow{answer: func(q string) QueueFlow {
			return QueueFlow{Queue: q, Unavailable: "cannot reach RabbitMQ's management API at http://127.0.0.1:1/"}
		}}
		for _, flow := range []Flow{down, nil} {
			p, err := b.as("alice").Plan(ctx, req.ID, flow, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.ArrivalRate == nil || !closeTo(*p.ArrivalRate, 5.0/300) || !strings.HasPrefix(p.ArrivalRateSource, "archive:") ||
				!closeTo(*p.UpperBound, 5.0/300*5) || p.AckRate != nil || p.SuggestedRate != nil ||
				!hasPrefixIn(p.Unavailable, "live view: ") || !hasPrefixIn(p.Unavailable, "ack_rate: ") {
				t.Fatalf("plan with %T: %+v", flow, p)
			}
		}
	})
	t.Run("a discard has no plan", func(t *testing.T) {
		more := b.seedToQueue(t, 200, 1, 1, b.queue, runEpoch)
		discard := b.pending(t, NewRequest{Kind: KindDiscard}, more)
		if _, err := b.as("alice").Plan(ctx, discard.ID, flow, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "publishes nothing") {
			t.Fatalf("plan of a discard: %v", err)
		}
	})
}

func hasPrefixIn(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
