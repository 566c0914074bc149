package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// testTiers keep end-to-end tests fast while still going through real TTL
// expiry in real retry queues.
var testTiers = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}

type testBundle struct {
	pool *pgxpool.Pool
	conn *amqp.Connection
	ch   *amqp.Channel
	topo worker.Topology
}

// setup gives a test a private database with the reservations schema and a
// private, declared topology that is deleted when the test ends.
func setup(t *testing.T) *testBundle {
	t.Helper()
	db := pgtest.New(t)
	if err := worker.EnsureSchema(context.Background(), db.Pool); err != nil {
		t.Fatal(err)
	}
	conn := amqptest.Dial(t)
	topo := worker.NewTopology(amqptest.Name(t, ""))
	topo.RetryTiers = testTiers
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	if err := worker.DeclareTopology(ch, topo); err != nil {
		t.Fatal(err)
	}
	return &testBundle{pool: db.Pool, conn: conn, ch: ch, topo: topo}
}

type reservation struct {
	id      string
	status  string
	version int64
	units   int
	// dueIn is how far ahead of the database's now its hold runs out;
	// zero means a minute ago.
	dueIn time.Duration
}

func seedReservation(t *testing.T, pool *pgxpool.Pool, r reservation) {
	t.Helper()
	if r.status == "" {
		r.status = "held"
	}
	if r.version == 0 {
		r.version = 1
	}
	if r.units == 0 {
		r.units = 2
	}
	if r.dueIn == 0 {
		r.dueIn = -time.Minute
	}
	_, err := pool.Exec(context.Background(), `INSERT INTO reservations.reservations (id, status, version, hold_until, units)
		VALUES ($1, $2, $3, now() + make_interval(secs => $5), $4)`, r.id, r.status, r.version, r.units, r.dueIn.Seconds())
	if err != nil {
		t.Fatalf("seed reservation %s: %v", r.id, err)
	}
}

func readReservation(t *testing.T, pool *pgxpool.Pool, id string) (status string, version int64) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT status, version FROM reservations.reservations WHERE id = $1`, id).
		Scan(&status, &version)
	if err != nil {
		t.Fatalf("read reservation %s: %v", id, err)
	}
	return status, version
}

func countRows(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func jobFor(id string, version int64) worker.Job {
	return worker.Job{
		ReservationID:   id,
		ExpectedVersion: version,
		HoldUntil:       time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC),
		IdempotencyKey:  fmt.Sprintf("expire:%s:v%d", id, version),
	}
}

func jobBody(t *testing.T, job worker.Job) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"reservation_id":   job.ReservationID,
		"expected_version": job.ExpectedVersion,
		"hold_until":       job.HoldUntil.Format(time.RFC3339),
		"idempotency_key":  job.IdempotencyKey,
		"attempt":          1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *testBundle) publish(t *testing.T, messageID string, body []byte) {
	t.Helper()
	err := b.ch.PublishWithContext(context.Background(), b.topo.Exchange, b.topo.RoutingKey, true, false, amqp.Publishing{
		ContentType:  "application/json",
		MessageId:    messageID,
		DeliveryMode: amqp.Persistent,
		Timestamp:    time.Now(),
		Body:         body,
	})
	if err != nil {
		t.Fatalf("publish %s: %v", messageID, err)
	}
}

// recorder collects worker events for assertions.
type recorder struct {
	mu     sync.Mutex
	events []worker.Event
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (r *recorder) record(e worker.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []worker.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.Event(nil), r.events...)
}

// waitTerminal waits until n deliveries have been finished with.
func (r *recorder) waitTerminal(t *testing.T, n int) []worker.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		events := r.snapshot()
		terminal := 0
		for _, e := range events {
			if e.Terminal() {
				terminal++
			}
		}
		if terminal >= n {
			return events
		}
		select {
		case <-r.signal:
		case <-deadline:
			t.Fatalf("waited 20s for %d finished deliveries, have %d; events: %+v", n, terminal, events)
		}
	}
}

// run starts the worker and stops it when the test ends, failing the test
// if Run ended with an error.
func (b *testBundle) run(t *testing.T, cfg worker.Config, expire worker.ExpireFunc) *recorder {
	t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Deps{Pool: b.pool, AMQP: b.conn, Topology: b.topo, Config: cfg, Expire: expire, OnEvent: rec.record})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("worker.Run did not stop within 20s of cancel")
		}
	})
	return rec
}

// getN takes n messages off queue, failing the test if they do not arrive.
func (b *testBundle) getN(t *testing.T, queue string, n int) []amqp.Delivery {
	t.Helper()
	var got []amqp.Delivery
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < n {
		d, ok, err := b.ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		if ok {
			got = append(got, d)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: got %d messages within 20s, want %d", queue, len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

func (b *testBundle) depth(t *testing.T, queue string) int {
	t.Helper()
	q, err := b.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect queue %s: %v", queue, err)
	}
	return q.Messages
}

func fixedClock(at time.Time) func() time.Time { return func() time.Time { return at } }
