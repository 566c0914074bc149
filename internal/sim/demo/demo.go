package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// runTimeout bounds a whole demo run: everything it waits for happens within
// a few seconds on a healthy local broker, so running out means something is
// wrong and the operator should hear why rather than wait.
const runTimeout = 50 * time.Second

// settleTimeout bounds each wait for the broker to catch up.
const settleTimeout = 15 * time.Second

// Deps is what Run works with.
type Deps struct {
	// Pool is the database that holds the reservations schema; Run creates
	// the schema when it is missing.
	Pool *pgxpool.Pool
	// AMQP is the broker connection; Run opens channels on it and closes
	// them, never the connection.
	AMQP *amqp.Connection
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// Topology names the queues. The zero value means the production names
	// (worker.NewTopology("")), so that `expiryctl dlq ingest` with its
	// defaults finds the dead letters.
	Topology worker.Topology
}

// Result counts what one demo run did.
type Result struct {
	// RunID is in every reservation id and message id of the run.
	RunID string
	// Published is the number of messages published, duplicates included.
	Published int
	// Processed is the number of deliveries the worker acked after a commit:
	// expired, skipped or duplicate.
	Processed int
	// Retried is the number of retry copies the worker sent through the
	// retry queues.
	Retried int
	// DeadLettered is the number of messages the run sent to the DLQ: by the
	// worker, by a reject, and by TTL expiry.
	DeadLettered int
	// ByCategory splits DeadLettered by the reason category each letter was
	// staged to show.
	ByCategory map[deadletter.Category]int
	// DeadLetterQueue is where the dead letters are waiting for ingest.
	DeadLetterQueue string
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// workerConfig retries fast so that the outage burst exhausts its budget in
// under a second, while still going through the real TTL retry queues.
var workerConfig = worker.Config{
	MaxAttempts:  3,
	Backoff:      worker.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: worker.EqualJitter},
	Concurrency:  4,
	JobTimeout:   5 * time.Second,
	RequeueDelay: 200 * time.Millisecond,
}

// Run stages the incident: it declares the topology, seeds reservations,
// lets RabbitMQ expire jobs published while no worker runs, then runs the
// reference worker over a mix of healthy and broken jobs and a burst during
// a simulated database outage, and returns once the work queues are drained
// and the dead letters are in the DLQ.
//
// Every id is unique to the run, so running the demo again adds a second
// incident beside the first. Run refuses to start when the work queue already
// has messages or consumers: another worker would take the jobs the demo
// stages, and messages ahead of the TTL jobs would keep them from expiring.
func Run(ctx context.Context, deps Deps) (Result, error) {
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if deps.Pool == nil || deps.AMQP == nil {
		return Result{}, errors.New("demo: a database pool and an AMQP connection are required")
	}
	topo := deps.Topology
	if topo.Queue == "" {
		topo = worker.NewTopology("")
	}
	out := &progress{w: deps.Out}
	if out.w == nil {
		out.w = io.Discard
	}

	runID := newRunID()
	p := newPlan(runID, time.Now())
	res := Result{RunID: runID, DeadLetterQueue: topo.DeadLetterQueue, ByCategory: map[deadletter.Category]int{}}

	ch, err := deps.AMQP.Channel()
	if err != nil {
		return res, fmt.Errorf("demo: open channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return res, fmt.Errorf("demo: enable publisher confirms: %w", err)
	}
	if err := worker.DeclareTopology(ch, topo); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	if err := worker.EnsureSchema(ctx, deps.Pool); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	if err := watchOutcomes(ctx, deps.Pool, out); err != nil {
		return res, err
	}
	work, err := ch.QueueDeclarePassive(topo.Queue, true, false, false, false, nil)
	if err != nil {
		return res, fmt.Errorf("demo: inspect queue %s: %w", topo.Queue, err)
	}
	if work.Messages > 0 || work.Consumers > 0 {
		return res, fmt.Errorf("demo: queue %s holds %d messages and has %d consumers, and the demo needs it idle: "+
			"stop the other worker and let it drain, or run the demo on a topology of its own",
			topo.Queue, work.Messages, work.Consumers)
	}
	dlq, err := ch.QueueDeclarePassive(topo.DeadLetterQueue, true, false, false, false, nil)
	if err != nil {
		return res, fmt.Errorf("demo: inspect queue %s: %w", topo.DeadLetterQueue, err)
	}
	out.printf("demo run %s: exchange %s → queue %s, dead letters to %s (holds %d already)",
		runID, topo.Exchange, topo.Queue, topo.DeadLetterQueue, dlq.Messages)

	if err := seedReservations(ctx, deps.Pool, p.seeds); err != nil {
		return res, err
	}
	out.printf("seeded %d reservations r-%s-* in schema %s", len(p.seeds), runID, worker.Schema)

	// Jobs published while no worker consumes, with a TTL shorter than the
	// outage: RabbitMQ dead-letters them with x-death reason "expired".
	n, err := publish(ctx, ch, topo, p, workerDown)
	res.Published += n
	if err != nil {
		return res, err
	}
	out.printf("worker down: published %d jobs with a %s TTL", n, brokerTTL)
	if err := waitFor(ctx, "RabbitMQ to expire the jobs published while the worker was down", func() (bool, error) {
		q, err := ch.QueueDeclarePassive(topo.Queue, true, false, false, false, nil)
		return err == nil && q.Messages == 0, err
	}); err != nil {
		return res, err
	}
	out.printf("RabbitMQ dead-lettered them as expired")

	db := &database{pool: deps.Pool, flaky: p.flaky}
	track := newTracker(runID, p, out)
	workerCtx, stopWorker := context.WithCancel(ctx)
	var workerErr error
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		workerErr = worker.Run(workerCtx, worker.Deps{AMQP: deps.AMQP, Topology: topo, Config: workerConfig,
			Expire: db.expire, OnEvent: track.record})
	}()
	stop := func() error {
		stopWorker()
		<-workerDone
		return workerErr
	}
	defer stop() //nolint:errcheck // only reached on an earlier error, which is the one to report
	out.printf("worker up: budget %d attempts, backoff %s–%s", workerConfig.MaxAttempts, workerConfig.Backoff.Base, workerConfig.Backoff.Max)

	out.printf("publishing %d jobs: healthy, duplicated, already paid, deleted, extended and malformed", p.count(normal))
	n, err = publish(ctx, ch, topo, p, normal)
	res.Published += n
	if err != nil {
		return res, err
	}
	if err := track.wait(ctx, workerDone, &workerErr, p.count(normal)); err != nil {
		return res, err
	}

	db.down.Store(true)
	out.printf("database outage: every ExpireOnce now times out; publishing %d jobs", p.count(outage))
	n, err = publish(ctx, ch, topo, p, outage)
	res.Published += n
	if err != nil {
		return res, err
	}
	err = track.wait(ctx, workerDone, &workerErr, p.count(normal)+p.count(outage))
	db.down.Store(false)
	if err != nil {
		return res, err
	}
	out.printf("database back")

	workQueues := topo.Queues()[:len(topo.Queues())-1]
	if err := waitFor(ctx, "the work and retry queues to drain", func() (bool, error) {
		for _, q := range workQueues {
			info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil || info.Messages > 0 {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return res, err
	}
	if err := stop(); err != nil {
		return res, fmt.Errorf("demo: worker: %w", err)
	}

	res.Processed, res.Retried, res.DeadLettered, res.ByCategory = track.totals()
	ttl := p.count(workerDown)
	res.DeadLettered += ttl
	res.ByCategory[deadletter.BrokerExpired] += ttl

	// Rejected messages reach the DLQ asynchronously. With a consumer on it
	// (an ingest running alongside) its depth proves nothing, so only an
	// idle DLQ is checked.
	if dlq.Consumers == 0 {
		want := dlq.Messages + res.DeadLettered
		if err := waitFor(ctx, fmt.Sprintf("queue %s to hold %d messages", topo.DeadLetterQueue, want), func() (bool, error) {
			q, err := ch.QueueDeclarePassive(topo.DeadLetterQueue, true, false, false, false, nil)
			return err == nil && q.Messages >= want, err
		}); err != nil {
			return res, fmt.Errorf("%w (is something else consuming it?)", err)
		}
	}
	res.Elapsed = time.Since(started)
	out.printf("done in %s: published %d, processed %d, retried %d, dead-lettered %d (%s)",
		res.Elapsed.Round(time.Millisecond), res.Published, res.Processed, res.Retried, res.DeadLettered, describe(res.ByCategory))
	return res, nil
}

func newRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func seedReservations(ctx context.Context, pool *pgxpool.Pool, seeds []seed) error {
	var ids, statuses []string
	var versions []int64
	var holds []time.Time
	var units []int32
	for _, s := range seeds {
		ids = append(ids, s.id)
		statuses = append(statuses, s.status)
		versions = append(versions, s.version)
		holds = append(holds, s.holdUntil)
		units = append(units, int32(s.units))
	}
	_, err := pool.Exec(ctx, `INSERT INTO reservations.reservations (id, status, version, hold_until, units)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::int[])`,
		ids, statuses, versions, holds, units)
	if err != nil {
		return fmt.Errorf("demo: seed reservations: %w", err)
	}
	return nil
}

// publish sends the plan's messages of one phase and waits for each confirm,
// so that nothing is counted as staged that the broker did not take.
func publish(ctx context.Context, ch *amqp.Channel, topo worker.Topology, p *plan, ph phase) (int, error) {
	n := 0
	for _, m := range p.messages {
		if m.phase != ph {
			continue
		}
		msg := m.msg
		msg.Timestamp = time.Now().UTC()
		confirm, err := ch.PublishWithDeferredConfirmWithContext(ctx, topo.Exchange, topo.RoutingKey, false, false, msg)
		if err != nil {
			return n, fmt.Errorf("demo: publish %s: %w", msg.MessageId, err)
		}
		ok, err := confirm.WaitContext(ctx)
		if err != nil {
			return n, fmt.Errorf("demo: the broker did not confirm %s: %w", msg.MessageId, err)
		}
		if !ok {
			return n, fmt.Errorf("demo: the broker did not confirm %s (nacked)", msg.MessageId)
		}
		n++
	}
	return n, nil
}

// waitFor polls cond until it holds, settleTimeout passes or ctx ends.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(settleTimeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("demo: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: gave up waiting for %s after %s", what, settleTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: waiting for %s: %w", what, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func describe(counts map[deadletter.Category]int) string {
	var parts []string
	for _, c := range deadletter.Categories() {
		if counts[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, counts[c]))
		}
	}
	return strings.Join(parts, ", ")
}

// progress serialises lines written from the worker's goroutines.
type progress struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// tracker follows the worker's events for this run's messages.
type tracker struct {
	runID    string
	category map[string]deadletter.Category
	out      *progress

	mu           sync.Mutex
	terminal     int
	processed    int
	retried      int
	deadLettered int
	byCategory   map[deadletter.Category]int
	changed      chan struct{}
}

func newTracker(runID string, p *plan, out *progress) *tracker {
	t := &tracker{runID: runID, category: map[string]deadletter.Category{}, out: out,
		byCategory: map[deadletter.Category]int{}, changed: make(chan struct{}, 1)}
	for _, m := range p.messages {
		if m.category != "" {
			t.category[m.msg.MessageId] = m.category
		}
	}
	return t
}

func (t *tracker) record(e worker.Event) {
	if !strings.Contains(e.MessageID, t.runID) {
		return
	}
	switch e.Action {
	case worker.ActionRetried:
		t.out.printf("  retry    %s: attempt %d failed (%s), next in %s via %s", e.MessageID, e.Attempt, e.ErrorClass, e.Delay.Round(time.Millisecond), e.Queue)
	case worker.ActionDeadLettered:
		t.out.printf("  dead     %s: %s after %d attempt(s)", e.MessageID, e.ErrorClass, e.Attempt)
	case worker.ActionRejected:
		t.out.printf("  rejected %s: %v", e.MessageID, e.Err)
	case worker.ActionReturned:
		t.out.printf("  returned %s to the queue: %v", e.MessageID, e.Err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Action {
	case worker.ActionAcked:
		t.processed++
	case worker.ActionRetried:
		t.retried++
	case worker.ActionDeadLettered, worker.ActionRejected:
		t.deadLettered++
		t.byCategory[t.category[e.MessageID]]++
	}
	if e.Terminal() {
		t.terminal++
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// wait returns once n of the run's deliveries are done with.
func (t *tracker) wait(ctx context.Context, workerDone <-chan struct{}, workerErr *error, n int) error {
	deadline := time.After(settleTimeout)
	for {
		t.mu.Lock()
		done := t.terminal
		t.mu.Unlock()
		if done >= n {
			return nil
		}
		select {
		case <-t.changed:
		case <-workerDone:
			if *workerErr == nil {
				return errors.New("demo: the worker stopped early")
			}
			return fmt.Errorf("demo: the worker stopped early: %w", *workerErr)
		case <-deadline:
			return fmt.Errorf("demo: the worker finished %d of %d jobs within %s", done, n, settleTimeout)
		case <-ctx.Done():
			return fmt.Errorf("demo: waiting for the worker: %w", ctx.Err())
		}
	}
}

func (t *tracker) totals() (processed, retried, deadLettered int, byCategory map[deadletter.Category]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.processed, t.retried, t.deadLettered, maps.Clone(t.byCategory)
}
