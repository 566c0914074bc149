package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// fastConfig retries through the test tiers with a fixed clock, so that the
// attempt history can be compared exactly.
func fastConfig(now time.Time) worker.Config {
	return worker.Config{
		MaxAttempts:  3,
		Backoff:      worker.Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: worker.EqualJitter},
		Concurrency:  2,
		RequeueDelay: 50 * time.Millisecond,
		Now:          fixedClock(now),
	}
}

var testNow = time.Date(2026, 11, 30, 12, 25, 0, 0, time.UTC)

// failing wraps ExpireOnce with a database that fails transiently the first
// n times, the way a failover looks from a client.
func failing(b *testBundle, n int64) (worker.ExpireFunc, *atomic.Int64) {
	var calls atomic.Int64
	return func(ctx context.Context, job worker.Job) (worker.Outcome, error) {
		if calls.Add(1) <= n {
			return "", &worker.JobError{Class: worker.ClassDBTimeout, Err: errors.New("dial tcp 10.0.0.7:5432: i/o timeout")}
		}
		return worker.ExpireOnce(ctx, b.pool, job)
	}, &calls
}

func TestRunRetriesTransientFailureThenSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-flaky", version: 3})
	expire, calls := failing(b, 2)
	rec := b.run(t, fastConfig(testNow), expire)

	b.publish(t, "expire-r-flaky-v3", jobBody(t, jobFor("r-flaky", 3)))
	events := rec.waitTerminal(t, 1)

	var actions []string
	for _, e := range events {
		actions = append(actions, string(e.Action))
	}
	if got := strings.Join(actions, ","); got != "retried,retried,acked" {
		t.Fatalf("actions %s, want retried,retried,acked; events %+v", got, events)
	}
	last := events[len(events)-1]
	if last.Outcome != worker.Expired || last.Attempt != 3 {
		t.Errorf("final event %+v, want expired at attempt 3", last)
	}
	for _, e := range events[:2] {
		if !strings.HasPrefix(e.Queue, b.topo.Queue+".retry.") || e.Delay <= 0 || e.ErrorClass != worker.ClassDBTimeout {
			t.Errorf("retry event %+v, want a db_timeout retry through a tier queue", e)
		}
	}
	if calls.Load() != 3 {
		t.Errorf("Expire called %d times, want 3", calls.Load())
	}
	if status, version := readReservation(t, b.pool, "r-flaky"); status != "expired" || version != 4 {
		t.Errorf("reservation is %s v%d, want expired v4", status, version)
	}
	if n := b.depth(t, b.topo.DeadLetterQueue); n != 0 {
		t.Errorf("DLQ holds %d messages, want 0", n)
	}
}

func TestRunDeadLettersWhenBudgetIsExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-down", version: 3})
	expire, _ := failing(b, 1000)
	cfg := fastConfig(testNow)
	cfg.HandlerVersion = "2026.11.30-v7"
	rec := b.run(t, cfg, expire)

	body := jobBody(t, jobFor("r-down", 3))
	b.publish(t, "expire-r-down-v3", body)
	rec.waitTerminal(t, 1)

	d := b.getN(t, b.topo.DeadLetterQueue, 1)[0]
	if string(d.Body) != string(body) || d.ContentType != "application/json" || d.MessageId != "expire-r-down-v3" {
		t.Errorf("dead letter changed the job: body %q content type %q message id %q", d.Body, d.ContentType, d.MessageId)
	}
	if !d.Timestamp.Equal(testNow) {
		t.Errorf("timestamp %v, want the dead-lettering time %v", d.Timestamp, testNow)
	}
	wantHeaders := map[string]any{
		worker.HeaderErrorClass:         worker.ClassDBTimeout,
		worker.HeaderLastError:          "dial tcp 10.0.0.7:5432: i/o timeout",
		worker.HeaderOriginalExchange:   b.topo.Exchange,
		worker.HeaderOriginalRoutingKey: b.topo.RoutingKey,
		worker.HeaderHandlerVersion:     "2026.11.30-v7",
	}
	for k, want := range wantHeaders {
		if got := d.Headers[k]; got != want {
			t.Errorf("header %s = %#v, want %#v", k, got, want)
		}
	}
	history, _ := d.Headers[worker.HeaderAttemptHistory].([]any)
	if len(history) != 3 {
		t.Fatalf("x-attempt-history has %d entries, want 3: %#v", len(history), d.Headers[worker.HeaderAttemptHistory])
	}
	for i, e := range history {
		entry, _ := e.(amqp.Table)
		at, _ := entry["at"].(time.Time)
		if !at.Equal(testNow) || entry["error_class"] != worker.ClassDBTimeout || entry["error"] != "dial tcp 10.0.0.7:5432: i/o timeout" {
			t.Errorf("history entry %d = %#v", i, entry)
		}
	}
	if status, _ := readReservation(t, b.pool, "r-down"); status != "held" {
		t.Errorf("reservation is %s, want held", status)
	}
	for _, q := range append([]string{b.topo.Queue}, b.topo.Queues()[1:len(b.topo.Queues())-1]...) {
		if n := b.depth(t, q); n != 0 {
			t.Errorf("queue %s holds %d messages after dead-lettering, want 0", q, n)
		}
	}
}

func TestRunDeadLettersPermanentErrorsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-moved", version: 5})
	rec := b.run(t, fastConfig(testNow), nil)

	jobs := map[string][]byte{
		"validation":       []byte(`{"reservationId": "r-x", "holdUntil": "2026-11-30T12:20:00Z"}`),
		"not_found":        jobBody(t, jobFor("r-missing", 1)),
		"version_conflict": jobBody(t, jobFor("r-moved", 4)),
	}
	for class, body := range jobs {
		b.publish(t, "job-"+class, body)
	}
	rec.waitTerminal(t, len(jobs))

	for _, d := range b.getN(t, b.topo.DeadLetterQueue, len(jobs)) {
		class, _ := d.Headers[worker.HeaderErrorClass].(string)
		if d.MessageId != "job-"+class {
			t.Errorf("message %s dead-lettered with class %q", d.MessageId, class)
		}
		if string(d.Body) != string(jobs[class]) {
			t.Errorf("message %s body changed to %q", d.MessageId, d.Body)
		}
		if history, _ := d.Headers[worker.HeaderAttemptHistory].([]any); len(history) != 1 {
			t.Errorf("message %s: %d history entries, want 1 (no retry for a permanent error)", d.MessageId, len(history))
		}
		if _, ok := d.Headers["x-death"]; ok {
			t.Errorf("message %s carries x-death though the broker never dead-lettered it", d.MessageId)
		}
	}
	if status, version := readReservation(t, b.pool, "r-moved"); status != "held" || version != 5 {
		t.Errorf("conflicting job changed the reservation to %s v%d", status, version)
	}
}

func TestRunRejectsUndecodableBodyForTheBrokerToDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.run(t, fastConfig(testNow), nil)

	b.publish(t, "garbage", []byte("\x1b[31mnot json\x1b[0m"))
	events := rec.waitTerminal(t, 1)
	if events[0].Action != worker.ActionRejected {
		t.Fatalf("event %+v, want rejected", events[0])
	}

	d := b.getN(t, b.topo.DeadLetterQueue, 1)[0]
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) != 1 {
		t.Fatalf("x-death = %#v, want one entry", d.Headers["x-death"])
	}
	death, _ := deaths[0].(amqp.Table)
	if death["reason"] != "rejected" || death["queue"] != b.topo.Queue {
		t.Errorf("x-death entry %#v, want reason rejected in queue %s", death, b.topo.Queue)
	}
	if _, ok := d.Headers[worker.HeaderErrorClass]; ok {
		t.Errorf("a broker-made dead letter carries %s", worker.HeaderErrorClass)
	}
}

// TestRunKeepsJobWhenDeadLetterRouteIsBroken checks the order "confirm, then
// ack": with no queue behind the dead-letter exchange the copy is returned,
// so the original must stay on the queue rather than be acked into nowhere.
func TestRunKeepsJobWhenDeadLetterRouteIsBroken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.ch.QueueUnbind(b.topo.DeadLetterQueue, "#", b.topo.DeadLetterExchange, nil); err != nil {
		t.Fatal(err)
	}
	rec := b.run(t, fastConfig(testNow), nil)
	b.publish(t, "expire-r-missing-v1", jobBody(t, jobFor("r-missing", 1)))

	deadline := time.Now().Add(10 * time.Second)
	for returned := 0; returned < 2; {
		returned = 0
		for _, e := range rec.snapshot() {
			if e.Terminal() {
				t.Fatalf("delivery finished with %+v though the dead-letter copy had nowhere to go", e)
			}
			if e.Action == worker.ActionReturned {
				returned++
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never reported the unroutable dead-letter copy")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.ch.QueueBind(b.topo.DeadLetterQueue, "#", b.topo.DeadLetterExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	rec.waitTerminal(t, 1)
	d := b.getN(t, b.topo.DeadLetterQueue, 1)[0]
	if d.Headers[worker.HeaderErrorClass] != worker.ClassNotFound || d.Headers[worker.HeaderHandlerVersion] != worker.DefaultHandlerVersion {
		t.Errorf("dead letter class %v, handler version %v, want not_found by %s", d.Headers[worker.HeaderErrorClass],
			d.Headers[worker.HeaderHandlerVersion], worker.DefaultHandlerVersion)
	}
}

func TestDeclareTopologyIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := worker.DeclareTopology(b.ch, b.topo); err != nil {
		t.Fatalf("second DeclareTopology: %v", err)
	}
	for _, q := range b.topo.Queues() {
		b.depth(t, q)
	}
}

func TestRunFailsOnMissingQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	topo := b.topo
	topo.Queue += ".absent"
	err := worker.Run(context.Background(), worker.Deps{Pool: b.pool, AMQP: b.conn, Topology: topo})
	if err == nil || !strings.Contains(err.Error(), topo.Queue) {
		t.Fatalf("Run on a missing queue = %v, want an error naming %s", err, topo.Queue)
	}
}

func TestRunReturnsWhenItsQueueIsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(context.Background(), worker.Deps{Pool: b.pool, AMQP: b.conn, Topology: b.topo})
	}()
	// Give the consumer time to register, then pull the queue from under it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := b.ch.QueueDeclarePassive(b.topo.Queue, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Consumers == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never started consuming")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.ch.QueueDelete(b.topo.Queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), b.topo.Queue) {
			t.Errorf("Run after its queue was deleted = %v, want an error naming the queue", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept running after its queue was deleted")
	}
}
