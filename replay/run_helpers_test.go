package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// runBundle is a migrated database, a broker with a topic exchange and a
// queue bound to it by runKey, and a policy with approvers bob and carol.
type runBundle struct {
	db       *pgtest.Database
	people   *pgtest.People
	pool     *pgxpool.Pool
	conn     *amqp.Connection
	exchange string
	queue    string
}

const runKey = "reservation.expire"

var runEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// testsCapture is the reason the tests' requests give for runs that do
// not capture their dead-letter queues: their letters come from no queue
// of the broker, and a test that needs jobs to die again plays the worker
// and the capture itself (dieAgain). run_dlq_watch_test.go runs the real
// capture.
const testsCapture = "the test plays the capture of its dead-letter queue"

// setupRun prepares a runBundle; policy are extra `policy set` KEY=VALUE
// changes (the defaults make the canary window short and the rate high).
func setupRun(t *testing.T, policy ...string) *runBundle {
	t.Helper()
	db := pgtest.New(t)
	conn := amqptest.Dial(t)
	b := &runBundle{db: db, people: db.People(t), pool: db.Pool, conn: conn, exchange: amqptest.Name(t, ".x"), queue: amqptest.Name(t, ".q")}
	amqptest.DeleteOnCleanup(t, []string{b.queue}, []string{b.exchange})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(b.exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(b.queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(b.queue, runKey, b.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	changes, err := ParsePolicyChanges(append([]string{"approvers=" + b.people.Get("bob").Name + "," + b.people.Get("carol").Name,
		"max_rate=10000", "canary_window=200ms"}, policy...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetPolicy(context.Background(), b.pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	return b
}

// runLetterOpts shapes one seeded letter.
type runLetterOpts struct {
	exchange, key string // x-original-*; both empty: none
	// failedIn is the work queue the letter failed in, beside an original
	// exchange: its x-death names failedIn's first retry queue (default
	// "work", a queue no test declares).
	failedIn    string
	originQueue string // x-first-death-queue when there is no original exchange
	camel       bool   // camelCase body
	extra       amqp.Table
}

// runLetter is a dead letter as the reference worker leaves it after its
// budget ran out on a trip through a retry queue: failure headers, broker
// bookkeeping, the original exchange and routing key, and headers of the
// producer's own that replay must keep.
func runLetter(n int, o runLetterOpts) deadletter.Message {
	body := fmt.Appendf(nil, `{"reservation_id": "r-%d", "expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-%d:v3","attempt":2}`, n, n)
	if o.camel {
		body = fmt.Appendf(nil, `{"reservationId":"r-%d","expectedVersion":3,"holdUntil":"2026-11-30T12:20:00Z","idempotencyKey":"expire:r-%d:v3"}`, n, n)
	}
	at := runEpoch.Add(time.Duration(n) * time.Second)
	retryQueue := "work.retry.1000"
	if o.failedIn != "" {
		retryQueue = o.failedIn + ".retry.1000"
	}
	h := amqp.Table{
		"x-error-class":     "db_timeout",
		"x-last-error":      "dial tcp: i/o timeout",
		"x-attempt-history": []any{amqp.Table{"at": at, "error_class": "db_timeout", "error": "dial tcp: i/o timeout"}},
		"x-death": []any{amqp.Table{"count": int64(1), "reason": "expired", "queue": retryQueue, "exchange": "",
			"routing-keys": []any{retryQueue}, "time": at}},
		"x-first-death-reason":   "expired",
		"x-first-death-exchange": "",
		"x-delivery-count":       int64(2),
		"x-tenant":               "acme-eu-1",
		"x-trace":                []byte{0, 1, 2, 0xff},
		"x-priority-hint":        int32(7),
	}
	if o.exchange != "" || o.key != "" {
		h["x-original-exchange"] = o.exchange
		h["x-original-routing-key"] = o.key
		h["x-first-death-queue"] = retryQueue
	} else if o.originQueue != "" {
		h["x-first-death-queue"] = o.originQueue
	} else {
		delete(h, "x-death")
	}
	for k, v := range o.extra {
		h[k] = v
	}
	return deadletter.Message{Queue: "test.dlq", Body: body, Headers: h, ContentType: "application/json",
		MessageID: fmt.Sprintf("expire:r-%d:v3", n), Timestamp: at}
}

// seed archives letters as ingest would and returns their ids in order.
func (b *runBundle) seed(t *testing.T, msgs ...deadletter.Message) []int64 {
	t.Helper()
	ctx := context.Background()
	letters := make([]deadletter.Letter, len(msgs))
	for i, m := range msgs {
		letters[i] = deadletter.Parse(m, nil, time.Now())
	}
	var res deadletter.StoreResult
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		res, err = deadletter.Insert(ctx, tx, letters)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stored != len(msgs) {
		t.Fatalf("stored %d of %d letters", res.Stored, len(msgs))
	}
	rows, err := b.pool.Query(ctx, `SELECT id FROM expiryctl.dead_letters WHERE id BETWEEN $1 AND $2 ORDER BY id`, res.FirstID, res.LastID)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// seedN archives n letters routed to the bundle's exchange and key.
func (b *runBundle) seedN(t *testing.T, first, n int) []int64 {
	t.Helper()
	msgs := make([]deadletter.Message, n)
	for i := range msgs {
		msgs[i] = runLetter(first+i, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue})
	}
	return b.seed(t, msgs...)
}

// as acts as the person named actor: their own login, labelled actor.
func (b *runBundle) as(actor string) *Service {
	return &Service{Pool: b.people.Get(actor).Pool, Actor: actor}
}

// approved creates nr as alice (filling in ids and why) and has bob approve it.
func (b *runBundle) approved(t *testing.T, nr NewRequest, ids []int64) Request {
	t.Helper()
	req := b.pending(t, nr, ids)
	got, err := b.as("bob").Approve(context.Background(), req.ID, ReviewOptions{Why: "ok", AllowFreshKey: nr.FreshKey, CohortHash: req.CohortHash})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (b *runBundle) pending(t *testing.T, nr NewRequest, ids []int64) Request {
	t.Helper()
	if nr.Kind == "" {
		nr.Kind = KindReplay
	}
	nr.Selection = Selection{IDs: ids}
	if nr.Why == "" {
		nr.Why = "INC-42"
	}
	if nr.Kind == KindReplay && nr.UnwatchedWhy == "" {
		nr.UnwatchedWhy = testsCapture
	}
	created, err := b.as("alice").Create(context.Background(), nr)
	if err != nil {
		t.Fatal(err)
	}
	return created.Request
}

// runner returns a Runner for the bundle as oncall, with fast checks.
func (b *runBundle) runner(t *testing.T) *Runner {
	t.Helper()
	br, err := newAMQPBroker(b.conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	// The handler check is not these tests' subject (handler_test.go's,
	// against the real management API): the runner is told the fix is
	// deployed.
	return &Runner{Pool: b.pool, Broker: br, Actor: "oncall", checkEvery: 50 * time.Millisecond,
		Consumers: fixedHandler{}}
}

// drain takes every message from queue, waiting up to timeout for want of
// them, then a little longer for strays.
func runDrain(t *testing.T, conn *amqp.Connection, queue string, want int, timeout time.Duration) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var got []amqp.Delivery
	deadline := time.Now().Add(timeout)
	quiet := time.Time{}
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, d)
			quiet = time.Time{}
			continue
		}
		if len(got) >= want {
			if quiet.IsZero() {
				quiet = time.Now()
			}
			if time.Since(quiet) > 100*time.Millisecond {
				return got
			}
		}
		if time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *runBundle) status(t *testing.T, id int64) Request {
	t.Helper()
	req, err := Get(context.Background(), b.pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// itemStates counts a request's items per state.
func (b *runBundle) itemStates(t *testing.T, id int64) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT state, count(*)::int FROM expiryctl.replay_items WHERE request_id = $1 GROUP BY 1`, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *runBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func wantRunRefusal(t *testing.T, err error, rule string) {
	t.Helper()
	r, ok := errors.AsType[*Refusal](err)
	if !ok {
		t.Fatalf("error = %v, want a refusal by rule %s", err, rule)
	}
	if r.Rule != rule {
		t.Fatalf("refused by rule %s (%s), want %s", r.Rule, r.Message, rule)
	}
}

func intPtr(n int) *int { return &n }
