package replay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// The handler check against the real services: PostgreSQL judges the
// start, RabbitMQ's management API says who consumes, and the consumers
// are AMQP connections advertising a handler-version, as the reference
// worker's do.

// seedFailedUnder archives n letters routed to the bundle's exchange that
// a worker of handler version dead-lettered, with error class class.
func (b *runBundle) seedFailedUnder(t *testing.T, first, n int, version, class string) []int64 {
	t.Helper()
	msgs := make([]deadletter.Message, n)
	for i := range msgs {
		msgs[i] = runLetter(first+i, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue,
			extra: amqp.Table{"x-handler-version": version, "x-error-class": class}})
	}
	return b.seed(t, msgs...)
}

// handlerRunner is the bundle's runner reading the real management API.
func (b *runBundle) handlerRunner(t *testing.T) *Runner {
	t.Helper()
	r := b.runner(t)
	r.Consumers = newManagement("")
	return r
}

// consumer is a worker "deployed" at a handler version: a connection of
// its own advertising it, consuming the bundle's queue (acking as it goes).
type consumer struct {
	conn *amqp.Connection
	tag  string
}

func (b *runBundle) deploy(t *testing.T, version string) *consumer {
	t.Helper()
	conn, err := amqp.DialConfig(amqptest.URL(), amqp.Config{Properties: amqp.Table{"handler-version": version}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{conn: conn, tag: amqptest.Name(t, "."+version)}
	if _, err := ch.Consume(b.queue, c.tag, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitConsumers waits until the management API (whose statistics lag by
// up to 5 s) reports exactly the versions want on the bundle's queue.
func (b *runBundle) awaitConsumers(t *testing.T, want ...string) {
	t.Helper()
	m := newManagement("")
	deadline := time.Now().Add(30 * time.Second)
	var got []QueueConsumers
	for time.Now().Before(deadline) {
		var err error
		got, err = m.TargetConsumers(context.Background(), []Target{{Exchange: b.exchange, RoutingKey: runKey}})
		if err == nil && len(got) == 1 && got[0].Queue == b.queue && sameVersions(got[0].Consumers, want) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("the management API never showed consumers %v on %s: last %+v", want, b.queue, got)
}

func sameVersions(cs []Consumer, want []string) bool {
	if len(cs) != len(want) {
		return false
	}
	left := append([]string{}, want...)
	for _, c := range cs {
		i := indexOf(left, c.HandlerVersion)
		if i < 0 {
			return false
		}
		left = append(left[:i], left[i+1:]...)
	}
	return true
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func wantRefusal(t *testing.T, err error, rule string) *Refusal {
	t.Helper()
	refusal, ok := errors.AsType[*Refusal](err)
	if !ok || refusal.Rule != rule {
		t.Fatalf("error = %v, want a refusal by rule %s", err, rule)
	}
	return refusal
}

// TestRunRefusesTheHandlerThatFailedTheCohort: the letters failed under
// v1 and the queue's only consumer runs v1: the run is refused by the
// database, the approval unspent. Once v2 is deployed, the same approval
// runs.
func TestRunRefusesTheHandlerThatFailedTheCohort(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedFailedUnder(t, 1, 4, "v1", "db_timeout")
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)
	if len(req.FailedUnder) != 1 || req.FailedUnder[0] != (VersionCount{Version: "v1", Letters: 4}) {
		t.Fatalf("failed under %+v, want v1 for 4 letters", req.FailedUnder)
	}
	if len(req.Targets) != 1 || req.Targets[0] != (Target{Exchange: "", RoutingKey: b.queue, Letters: 4}) {
		t.Fatalf("targets %+v", req.Targets)
	}
	old := b.deploy(t, "v1")
	b.awaitConsumers(t, "v1")

	r := b.handlerRunner(t)
	_, err := r.Run(ctx, req.ID)
	refusal := wantRefusal(t, err, ConditionSameHandler)
	for _, want := range []string{b.queue, "v1", "--same-handler-ok"} {
		if !strings.Contains(refusal.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, refusal.Message)
		}
	}
	if got := b.status(t, req.ID); got.Status != StatusApproved || got.ApprovalSpent {
		t.Fatalf("after the refusal the request is %s (approval spent %v), want approved and unspent", got.Status, got.ApprovalSpent)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run' AND outcome <> 'ok'
		AND details->>'rule' = 'same-handler'`); n != 1 {
		t.Errorf("%d refused replay.run rows naming same-handler, want 1", n)
	}

	// The fix is deployed: v2 replaces v1.
	_ = old.conn.Close()
	b.deploy(t, "v2")
	b.awaitConsumers(t, "v2")
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Status != StatusCompleted || res.Confirmed != 4 {
		t.Fatalf("run onto v2: %+v, %v", res, err)
	}
	var seen string
	if err := b.pool.QueryRow(ctx, `SELECT details->'consumers'->'queues'->0->'consumers'->0->>'handler_version'
		FROM expiryctl.audit_log WHERE action = 'replay.run.start' AND target = $1`, requestTarget(req.ID)).Scan(&seen); err != nil || seen != "v2" {
		t.Errorf("the start's audit row records the consumer's version as %q (%v), want v2", seen, err)
	}
}

// TestRunRefusesWithNoConsumer: nothing consumes the queue, so nothing
// would take the replayed jobs; a request that says the same handler is
// fine, with why, runs anyway.
func TestRunRefusesWithNoConsumer(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedFailedUnder(t, 1, 3, "v1", "db_timeout")
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids[:2])
	r := b.handlerRunner(t)
	_, err := r.Run(ctx, req.ID)
	_ = wantRefusal(t, err, ConditionNoConsumer)

	allowed := b.approved(t, NewRequest{Canary: intPtr(0), SameHandlerWhy: "INC-42: the database failed over, the handler was never at fault"}, ids[2:])
	if !allowed.SameHandlerOK || allowed.SameHandlerWhy == "" {
		t.Fatalf("the request does not carry its flag: %+v", allowed)
	}
	res, err := r.Run(ctx, allowed.ID)
	if err != nil || res.Status != StatusCompleted || res.Confirmed != 1 {
		t.Fatalf("a same-handler-ok run: %+v, %v", res, err)
	}
}

// TestRunRefusesWhenTheManagementAPIIsUnreachable: nothing shows a new
// handler, so the run is refused, saying why and what allows it.
func TestRunRefusesWhenTheManagementAPIIsUnreachable(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ids := b.seedFailedUnder(t, 1, 1, "v1", "db_timeout")
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)
	r := b.runner(t)
	r.Consumers = newManagement("http://guest:guest@127.0.0.1:1/")
	_, err := r.Run(context.Background(), req.ID)
	refusal := wantRefusal(t, err, ConditionHandlerUnverified)
	for _, want := range []string{"cannot reach RabbitMQ's management API", "--management-url", "--same-handler-ok"} {
		if !strings.Contains(refusal.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, refusal.Message)
		}
	}
}

// TestRunHaltsWhenTheHandlerSwapsBack: the run starts onto v2; mid-run v1
// comes back and v2 goes (a rollback): the next checks see only v1 and
// halt the run, recorded with what they saw.
func TestRunHaltsWhenTheHandlerSwapsBack(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedFailedUnder(t, 1, 300, "v1", "db_timeout")
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 10}, ids)
	fixed := b.deploy(t, "v2")
	b.awaitConsumers(t, "v2")

	r := b.handlerRunner(t)
	started := make(chan struct{})
	var once bool
	r.Progress = func(p Progress) {
		if p.Confirmed > 0 && !once {
			once = true
			close(started)
		}
	}
	done := make(chan error, 1)
	var res RunResult
	go func() {
		var err error
		res, err = r.Run(ctx, req.ID)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the run ended before the swap: %+v, %v", res, err)
	}
	// v1 is seen beside v2 before v2 goes: the API shows a closed
	// connection's consumers gone at once, a new one's only with its next
	// statistics.
	b.deploy(t, "v1")
	b.awaitConsumers(t, "v2", "v1")
	_ = fixed.conn.Close()

	err := <-done
	halt, ok := errors.AsType[*HaltError](err)
	if !ok || halt.Condition != ConditionSameHandler {
		t.Fatalf("error = %v, want a halt by %s", err, ConditionSameHandler)
	}
	if res.Status != StatusHalted || res.Confirmed == 0 || res.Confirmed >= 300 {
		t.Errorf("result %+v: want halted part-way", res)
	}
	if got := b.status(t, req.ID); got.Status != StatusHalted || !strings.HasPrefix(got.HaltReason, "same-handler: ") {
		t.Errorf("request %s, halt reason %q", got.Status, got.HaltReason)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.halt' AND target = $1
		AND details->>'condition' = 'same-handler' AND details->'consumers'->'queues'->0->'consumers'->0->>'handler_version' = 'v1'`,
		requestTarget(req.ID)); n != 1 {
		t.Errorf("%d replay.halt rows recording the v1 consumer, want 1", n)
	}
}

// TestPermanentLettersNeedTheFlag: conflict letters in a replay are
// refused unless the request includes them, which the approver then sees,
// with those letters listed apart.
func TestPermanentLettersNeedTheFlag(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	transient := b.seedFailedUnder(t, 1, 2, "v1", "db_timeout")
	conflicts := b.seedFailedUnder(t, 10, 2, "v1", "version_conflict")
	cohort := append(append([]int64{}, transient...), conflicts...)
	_, err := b.as("alice").Create(ctx, NewRequest{Kind: KindReplay, Selection: Selection{IDs: cohort}, Why: "INC-42"})
	refusal := wantRefusal(t, err, "permanent-letters")
	for _, want := range []string{"conflict 2", "--include-permanent", "dlq discard"} {
		if !strings.Contains(refusal.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, refusal.Message)
		}
	}

	req := b.pending(t, NewRequest{IncludePermanent: true}, cohort)
	d, err := b.as("bob").Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !d.IncludePermanent || d.PermanentCount != 2 || len(d.Permanent) != 2 {
		t.Fatalf("the approver sees include_permanent %v, %d permanent letters (%d listed)", d.IncludePermanent, d.PermanentCount, len(d.Permanent))
	}
	for i, l := range d.Permanent {
		if l.DeadLetterID != conflicts[i] || l.Category != deadletter.Conflict || l.ErrorClass != "version_conflict" || l.LastError == "" {
			t.Errorf("permanent letter %d: %+v", i, l)
		}
	}
	if d.Handler == nil || d.Handler.ConsumedNow == nil || d.Handler.Condition != ConditionHandlerUnverified {
		t.Errorf("a show without a management reader: handler %+v, want unverified", d.Handler)
	}
	// A discard of the same letters is how "never retry" is decided: no flag.
	if _, err := b.as("alice").Create(ctx, NewRequest{Kind: KindDiscard, Selection: Selection{IDs: conflicts[:1]}, Why: "INC-42"}); err == nil {
		t.Error("a letter joined a second open request")
	}
}

// TestShowSaysWhatConsumesNow: beside the versions the cohort failed
// under, the approver sees the target queue's consumers and the verdict a
// run would meet.
func TestShowSaysWhatConsumesNow(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedFailedUnder(t, 1, 3, "v1", "db_timeout")
	req := b.pending(t, NewRequest{}, ids)
	b.deploy(t, "v1")
	b.awaitConsumers(t, "v1")
	svc := b.as("bob")
	svc.Consumers = newManagement("")
	d, err := svc.Show(ctx, req.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler
	if h == nil || h.ConsumedNow == nil || len(h.ConsumedNow.Queues) != 1 || h.ConsumedNow.Queues[0].Queue != b.queue {
		t.Fatalf("consumed now: %+v", h)
	}
	if h.Condition != ConditionSameHandler || len(h.FailedUnder) != 1 || h.FailedUnder[0].Version != "v1" {
		t.Errorf("verdict %q, failed under %+v: want same-handler under v1", h.Condition, h.FailedUnder)
	}
}
