package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// rabbit is a test's connection to the broker, with a channel in confirm
// mode: a letter counts as published only once the broker confirmed it, so
// "published" in the assertions is exactly what the broker holds.
type rabbit struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

func newRabbit(t testing.TB) *rabbit {
	t.Helper()
	conn := amqptest.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm mode: %v", err)
	}
	// A buffer larger than any test's letters: an unroutable letter is a test
	// bug to report, not a reason for the channel to block.
	returns := ch.NotifyReturn(make(chan amqp.Return, 10000))
	return &rabbit{conn: conn, ch: ch, returns: returns}
}

// queue declares a durable queue named for the test, deleted when it ends.
func (r *rabbit) queue(t testing.TB, suffix string, args amqp.Table) string {
	t.Helper()
	name := amqptest.Name(t, suffix)
	amqptest.DeleteOnCleanup(t, []string{name}, nil)
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	return name
}

// publish sends msgs to queue through the default exchange and waits until
// the broker confirmed every one. Confirms are awaited in windows, so
// thousands of letters take a fraction of a second rather than a round trip
// each.
func (r *rabbit) publish(t testing.TB, queue string, msgs ...amqp.Publishing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	const window = 500
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	flush := func() {
		t.Helper()
		for _, dc := range pending {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				t.Fatalf("publish to %s not confirmed (ok=%v): %v", queue, ok, err)
			}
		}
		pending = pending[:0]
		select {
		case ret := <-r.returns:
			t.Fatalf("publish to %s: returned unroutable (%d %s)", queue, ret.ReplyCode, ret.ReplyText)
		default:
		}
	}
	for _, m := range msgs {
		// mandatory: a letter that reaches no queue would make every count
		// in the assertions silently wrong.
		dc, err := r.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			t.Fatalf("publish to %s: %v", queue, err)
		}
		pending = append(pending, dc)
		if len(pending) == window {
			flush()
		}
	}
	flush()
}

// inspect returns the queue's ready messages and consumers. A passive
// declare counts only ready messages, not those a consumer holds unacked.
func (r *rabbit) inspect(t testing.TB, queue string) (ready, consumers int) {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages, q.Consumers
}

// settled waits until no consumer is left on queue and returns its message
// count. With no consumer, every unacknowledged message has been put back,
// so the count is every message the queue holds.
func (r *rabbit) settled(t testing.TB, queue string) int {
	t.Helper()
	var ready int
	waitFor(t, 30*time.Second, "the consumers of "+queue+" to go away", func() bool {
		var consumers int
		ready, consumers = r.inspect(t, queue)
		return consumers == 0
	})
	return ready
}

// count runs a `SELECT count(*) …` query.
func count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	// A context per query rather than withTimeout: count is polled, and
	// every withTimeout adds a cleanup that lives as long as the test.
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// rows counts the archived letters.
func rows(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	return count(t, pool, "SELECT count(*) FROM expiryctl.dead_letters")
}
