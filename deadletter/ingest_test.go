package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// ingestBundle is one test's private database, broker connection and DLQ.
type ingestBundle struct {
	pool *pgxpool.Pool
	conn *amqp.Connection
	ch   *amqp.Channel
	dlq  string
}

func setupIngest(t *testing.T) *ingestBundle {
	t.Helper()
	db := pgtest.New(t)
	conn := amqptest.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dlq := amqptest.Name(t, ".dlq")
	amqptest.DeleteOnCleanup(t, []string{dlq}, nil)
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	return &ingestBundle{pool: db.Pool, conn: conn, ch: ch, dlq: dlq}
}

// jobBody is a contract-shaped expiry job for reservation n.
func jobBody(n int) []byte {
	return fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-%d:v3","attempt":5}`, n, n)
}

// workerLetter is what the reference worker publishes to the DLX for job n.
func workerLetter(n int, class string) amqp.Publishing {
	return amqp.Publishing{
		ContentType: "application/json",
		MessageId:   fmt.Sprintf("expire:r-%d:v3", n),
		Timestamp:   time.Date(2026, 11, 30, 12, 21, 0, 0, time.UTC).Add(time.Duration(n) * time.Second),
		Body:        jobBody(n),
		Headers: amqp.Table{
			"x-error-class":          class,
			"x-last-error":           "dial tcp 10.0.0.5:5432: i/o timeout",
			"x-original-exchange":    "reservations",
			"x-original-routing-key": "reservation.expire",
			"x-attempt-history": []any{
				amqp.Table{"at": time.Date(2026, 11, 30, 12, 20, 1, 0, time.UTC), "error_class": class, "error": "first"},
				amqp.Table{"at": time.Date(2026, 11, 30, 12, 20, 5, 0, time.UTC), "error_class": class, "error": "second"},
			},
		},
	}
}

func (b *ingestBundle) publish(t *testing.T, queue string, msgs ...amqp.Publishing) {
	t.Helper()
	ctx := context.Background()
	for _, m := range msgs {
		conf, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := conf.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
}

func (b *ingestBundle) ingest(t *testing.T, ctx context.Context, opts deadletter.IngestOptions) (deadletter.IngestStats, error) {
	t.Helper()
	src, err := broker.OpenDLQSource(b.conn, b.dlq, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	opts.Queue, opts.Actor = b.dlq, "test"
	return deadletter.Ingest(ctx, b.pool, src, opts)
}

func (b *ingestBundle) ready(t *testing.T, queue string) int {
	t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

func (b *ingestBundle) count(t *testing.T, where string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM expiryctl.dead_letters WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIngestWorkerLettersAndDuplicates(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	// The same letter twice: what a worker crash between publish and ack leaves.
	b.publish(t, b.dlq, workerLetter(1, "db_timeout"), workerLetter(1, "db_timeout"), workerLetter(2, "validation"))

	stats, err := b.ingest(t, context.Background(), deadletter.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Received != 3 || stats.Stored != 2 || stats.Duplicates != 1 {
		t.Fatalf("stats = %+v, want 3 received, 2 stored, 1 duplicate", stats)
	}
	if n := b.ready(t, b.dlq); n != 0 {
		t.Fatalf("%d messages left in the DLQ, want 0", n)
	}
	if n := b.count(t, "reason_category = 'transient-exhausted' AND reservation_id = 'r-1' AND original_exchange = 'reservations' AND attempts = 5"); n != 1 {
		t.Fatalf("want one transient-exhausted row for r-1 with its origin, got %d", n)
	}
	if n := b.count(t, "reason_category = 'validation' AND idempotency_key = 'expire:r-2:v3'"); n != 1 {
		t.Fatalf("want one validation row for r-2, got %d", n)
	}

	// A redelivery of stored letters is a no-op.
	b.publish(t, b.dlq, workerLetter(1, "db_timeout"))
	stats, err = b.ingest(t, context.Background(), deadletter.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Stored != 0 || stats.Duplicates != 1 || b.count(t, "true") != 2 {
		t.Fatalf("redelivery stats = %+v, rows = %d; want a no-op", stats, b.count(t, "true"))
	}
}

func TestIngestBrokerMadeLetters(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	// A work queue that dead-letters into the test's DLQ the way RabbitMQ
	// does, so the x-death headers are the broker's own.
	work := amqptest.Name(t, ".work")
	amqptest.DeleteOnCleanup(t, []string{work}, nil)
	if _, err := b.ch.QueueDeclare(work, true, false, false, false, amqp.Table{
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": b.dlq,
		"x-max-length":              int32(2),
	}); err != nil {
		t.Fatal(err)
	}
	msg := func(n int) amqp.Publishing {
		return amqp.Publishing{ContentType: "application/json", MessageId: fmt.Sprintf("m-%d", n), Body: jobBody(n)}
	}
	// Rejected by a consumer.
	b.publish(t, work, msg(1))
	d, ok, err := b.ch.Get(work, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	// Expired by TTL.
	expiring := msg(2)
	expiring.Expiration = "1"
	b.publish(t, work, expiring)
	waitFor(t, func() bool { return b.ready(t, b.dlq) >= 2 })
	// Overflowed: the third message pushes the oldest out (maxlen).
	b.publish(t, work, msg(3), msg(4), msg(5))
	waitFor(t, func() bool { return b.ready(t, b.dlq) >= 3 })

	if _, err := b.ingest(t, context.Background(), deadletter.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reservation string
		category    deadletter.Category
	}{
		{"r-1", deadletter.Unknown},
		{"r-2", deadletter.BrokerExpired},
		{"r-3", deadletter.BrokerLimit},
	} {
		if n := b.count(t, "reservation_id = $1 AND reason_category = $2 AND origin_queue = $3", c.reservation, string(c.category), work); n != 1 {
			var got, origin string
			_ = b.pool.QueryRow(context.Background(), "SELECT reason_category, coalesce(origin_queue, '') FROM expiryctl.dead_letters WHERE reservation_id = $1", c.reservation).Scan(&got, &origin)
			t.Errorf("%s: want one %s row with origin queue %s, got %d (%s from %q)", c.reservation, c.category, work, n, got, origin)
		}
	}
}

func TestIngestPostgresFailureAcksNothing(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION expiryctl.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'disk full (simulated)'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON expiryctl.dead_letters FOR EACH ROW EXECUTE FUNCTION expiryctl.refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		b.publish(t, b.dlq, workerLetter(i, "db_timeout"))
	}
	_, err = b.ingest(t, ctx, deadletter.IngestOptions{Batch: 5})
	var storeErr *deadletter.StoreError
	if !errors.As(err, &storeErr) {
		t.Fatalf("ingest error = %v, want a StoreError", err)
	}
	// The source's channel is closed by now, so every unacked letter is back.
	waitFor(t, func() bool { return b.ready(t, b.dlq) == 20 })
}

func TestIngestConcurrentIngestersStoreEachLetterOnce(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	const letters = 2000
	msgs := make([]amqp.Publishing, letters)
	for i := range msgs {
		msgs[i] = workerLetter(i, "throttled")
	}
	b.publish(t, b.dlq, msgs...)
	// And a second copy of the first 100: duplicates across processes.
	b.publish(t, b.dlq, msgs[:100]...)

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.ingest(t, context.Background(), deadletter.IngestOptions{Batch: 100})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return b.ready(t, b.dlq) == 0 })
	if n := b.count(t, "true"); n != letters {
		t.Fatalf("%d rows, want %d", n, letters)
	}
}

func TestIngestFollowStopsCleanlyOnCancel(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	for i := range 300 {
		b.publish(t, b.dlq, workerLetter(i, "db_timeout"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.ingest(t, ctx, deadletter.IngestOptions{Follow: true, Batch: 50})
		done <- err
	}()
	waitFor(t, func() bool { return b.count(t, "true") > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v, want nil after cancel", err)
	}
	// Everything is either stored or back in the queue, nothing both.
	waitFor(t, func() bool { return b.count(t, "true")+b.ready(t, b.dlq) == 300 })
}

func TestIngestLinksReincarnations(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	first := workerLetter(7, "db_timeout")
	b.publish(t, b.dlq, first)
	if _, err := b.ingest(t, context.Background(), deadletter.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	again := workerLetter(7, "db_timeout")
	again.Headers["x-replay-request"] = int64(12)
	again.Headers["x-replay-count"] = int32(1)
	again.Timestamp = again.Timestamp.Add(time.Hour)
	b.publish(t, b.dlq, again)
	if _, err := b.ingest(t, context.Background(), deadletter.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	var firstID, prev int64
	var replayReq int64
	err := b.pool.QueryRow(context.Background(), `
		SELECT a.id, b.previous_id, b.replay_request_id FROM expiryctl.dead_letters a
		JOIN expiryctl.dead_letters b ON b.id > a.id AND b.job_key = a.job_key`).Scan(&firstID, &prev, &replayReq)
	if err != nil {
		t.Fatal(err)
	}
	if prev != firstID || replayReq != 12 {
		t.Fatalf("second incarnation links to %d (request %d), want %d (request 12)", prev, replayReq, firstID)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
