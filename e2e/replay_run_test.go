package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
)

// replayWorld is a database with the reservations model, the reference
// worker's topology on the broker under a test prefix, and an archive of
// dead letters the worker itself made.
type replayWorld struct {
	db   *pgtest.Database
	conn *amqp.Connection
	topo worker.Topology
	cli  *cli
	// approver is a login of its own in expiryctl_approver: the requests
	// are made as the test server's superuser, and four-eyes compares
	// logins.
	approver *pgtest.Login
	// letters are the archived dead letter ids, oldest first.
	letters []int64
	// states is each reservation's status when the letters were made.
	states map[string]string
}

// reservationState decides what a reservation looks like when the replay
// comes: most are still held, some were paid meanwhile, some already expired
// by another path.
func reservationState(n int) string {
	switch {
	case n%5 == 0:
		return "paid"
	case n%7 == 0:
		return "expired"
	}
	return "held"
}

// newReplayWorld makes n jobs die the way production makes them die: the
// reference worker, with its database timing out, retries each job once
// through its retry queue and then dead-letters it with x-error-class,
// x-attempt-history and x-original-*; `expiryctl dlq ingest` captures the DLQ.
func newReplayWorld(t *testing.T, n int, policy ...string) *replayWorld {
	t.Helper()
	ctx := withTimeout(t)
	w := &replayWorld{db: pgtest.New(t), conn: amqptest.Dial(t), topo: worker.NewTopology(amqptest.Name(t, "")),
		states: map[string]string{}}
	w.cli = newCLI(w.db.URL, "oncall")
	amqptest.DeleteOnCleanup(t, w.topo.Queues(), w.topo.Exchanges())
	ch, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.DeclareTopology(ch, w.topo); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	if err := worker.EnsureSchema(ctx, w.db.Pool); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	statuses := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("r-%d", i+1)
		statuses[i] = reservationState(i + 1)
		w.states[ids[i]] = statuses[i]
	}
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO reservations.reservations (id, status, version, hold_until, units)
		SELECT id, status, 3, now() - interval '1 hour', 2 FROM unnest($1::text[], $2::text[]) AS u(id, status)`, ids, statuses); err != nil {
		t.Fatal(err)
	}

	// The sick worker.
	sick, stopSick := context.WithCancel(context.Background())
	var dead sync.WaitGroup
	var deadLettered sync.Map
	failing := worker.Deps{AMQP: w.conn, Topology: w.topo,
		Config: worker.Config{MaxAttempts: 2, Concurrency: 4, Backoff: worker.Backoff{Base: 5 * time.Millisecond, Max: 5 * time.Millisecond, Jitter: worker.NoJitter},
			HandlerVersion: sickVersion},
		Expire: func(context.Context, worker.Job) (worker.Outcome, error) {
			return "", &worker.JobError{Class: worker.ClassDBTimeout, Err: errors.New("dial tcp 10.0.0.5:5432: i/o timeout")}
		},
		OnEvent: func(e worker.Event) {
			if e.Action == worker.ActionDeadLettered {
				deadLettered.Store(e.MessageID, true)
			}
		},
	}
	dead.Go(func() { _ = worker.Run(sick, failing) })
	w.publishJobs(t, n)
	waitFor(t, 60*time.Second, "the sick worker to dead-letter every job", func() bool {
		got := 0
		deadLettered.Range(func(any, any) bool { got++; return true })
		return got == n
	})
	stopSick()
	dead.Wait()

	w.cli.ok(t, "dlq", "ingest", "--queue", w.topo.DeadLetterQueue)
	w.letters = w.ids(t, `SELECT id FROM expiryctl.dead_letters ORDER BY id`)
	if len(w.letters) != n {
		t.Fatalf("%d letters archived, want %d", len(w.letters), n)
	}
	changes, err := replay.ParsePolicyChanges(append([]string{"max_rate=1000", "max_cohort=5000"}, policy...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, w.db.Pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	return w
}

// publishJobs publishes jobs r-1 … r-n to the topology's exchange as the
// API's outbox does, with confirms.
func (w *replayWorld) publishJobs(t *testing.T, n int) {
	t.Helper()
	ch, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx := withTimeout(t)
	pending := make([]*amqp.DeferredConfirmation, 0, n)
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("expire:r-%d:v3", i)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, w.topo.Exchange, w.topo.RoutingKey, true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: key,
			Body: fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":%q,"attempt":1}`, i, key),
		})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, dc)
	}
	for _, dc := range pending {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("job publish not confirmed: %v", err)
		}
	}
}

// request freezes the whole archive into one approved replay request, made
// by requester and approved by approver (in-process: `replay request` and
// `replay approve` have tests of their own).
func (w *replayWorld) request(t *testing.T, nr replay.NewRequest) replay.Request {
	t.Helper()
	ctx := withTimeout(t)
	nr.Kind, nr.Selection, nr.Why = replay.KindReplay, replay.Selection{IDs: w.letters}, "INC-7 database failover"
	created, err := (&replay.Service{Pool: w.db.Pool, Actor: "requester"}).Create(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	return created.Request
}

func (w *replayWorld) approve(t *testing.T, id int64) {
	t.Helper()
	if w.approver == nil {
		w.approver = w.db.GrantedLogin(t, "approver", "expiryctl_approver")
	}
	req, err := replay.Get(withTimeout(t), w.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&replay.Service{Pool: w.approver.Pool, Actor: "approver"}).Approve(withTimeout(t), id,
		replay.ReviewOptions{Why: "checked", CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
}

// The handler versions of the worker that dead-letters the jobs and of
// the fixed one deployed before the replay.
const (
	sickVersion  = "reference-1"
	fixedVersion = "reference-2"
)

// runWorker deploys the fixed reference worker, on a connection of its own
// that advertises its handler version, until the test ends, and waits
// until RabbitMQ's management API shows it consuming (its statistics lag
// by up to 5 s), as `replay run`'s handler check reads it.
func (w *replayWorld) runWorker(t *testing.T) {
	t.Helper()
	conn, err := broker.DialWithProperties(amqptest.URL(), worker.ConnectionProperties(fixedVersion))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = worker.Run(ctx, worker.Deps{Pool: w.db.Pool, AMQP: conn, Topology: w.topo,
			Config: worker.Config{MaxAttempts: 2, Concurrency: 4, HandlerVersion: fixedVersion}})
	})
	t.Cleanup(func() { cancel(); wg.Wait(); _ = conn.Close() })
	managementURL, err := broker.ManagementURLFor(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	m := broker.NewManagement(broker.ManagementConfig{URL: managementURL, AMQPURL: amqptest.URL()})
	waitFor(t, 30*time.Second, "the management API to show the fixed worker consuming "+w.topo.Queue, func() bool {
		got, err := m.TargetConsumers(context.Background(), []replay.Target{{Exchange: w.topo.Exchange, RoutingKey: w.topo.RoutingKey}})
		for _, q := range got {
			if err == nil && q.Queue == w.topo.Queue && len(q.Consumers) > 0 && q.Consumers[0].HandlerVersion == fixedVersion {
				return true
			}
		}
		return false
	})
}

func (w *replayWorld) ids(t *testing.T, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := w.db.Pool.Query(withTimeout(t), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// assertTransitionedOnce checks the reservations after the worker processed
// every replayed job: each held reservation expired exactly once (one
// capacity release), each paid or already expired one none.
func (w *replayWorld) assertTransitionedOnce(t *testing.T, jobs int) {
	t.Helper()
	w.assertTransitionedOnceBut(t, jobs, nil)
}

// assertTransitionedOnceBut is assertTransitionedOnce for every reservation
// but those of unsent, whose jobs never reached the queue: those are as
// they were.
func (w *replayWorld) assertTransitionedOnceBut(t *testing.T, jobs int, unsent map[string]bool) {
	t.Helper()
	waitFor(t, 60*time.Second, "the worker to process every replayed job", func() bool {
		return count(t, w.db.Pool, `SELECT count(*) FROM reservations.processed_jobs`) >= jobs
	})
	rows, err := w.db.Pool.Query(withTimeout(t), `SELECT r.id, r.status, count(c.reservation_id)::int
		FROM reservations.reservations r LEFT JOIN reservations.capacity_releases c ON c.reservation_id = r.id
		GROUP BY r.id, r.status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var releases int
		if err := rows.Scan(&id, &status, &releases); err != nil {
			t.Fatal(err)
		}
		before := w.states[id]
		switch {
		case unsent[id] && (status != before || releases != 0):
			t.Errorf("reservation %s was %s and its job never reached the queue: now %s with %d capacity releases, want unchanged with none",
				id, before, status, releases)
		case unsent[id]:
		case before == "held" && (status != "expired" || releases != 1):
			t.Errorf("reservation %s was held: now %s with %d capacity releases, want expired with exactly 1", id, status, releases)
		case before != "held" && (status != before || releases != 0):
			t.Errorf("reservation %s was %s: now %s with %d capacity releases, want unchanged with none", id, before, status, releases)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// replaySummary is `replay run -o json`.
type replaySummary struct {
	RequestID   int64   `json:"request_id"`
	Status      string  `json:"status"`
	Confirmed   int     `json:"confirmed"`
	Skipped     int     `json:"skipped"`
	Failed      int     `json:"failed"`
	Published   int     `json:"published"`
	Republished int     `json:"republished"`
	Elapsed     float64 `json:"elapsed_seconds"`
	HaltReason  string  `json:"halt_reason"`
	// HaltCondition names the stop condition that halted the run.
	HaltCondition string `json:"halt_condition"`
}

func itemStates(t *testing.T, pool *pgxpool.Pool, request int64) map[string]int {
	t.Helper()
	rows, err := pool.Query(withTimeout(t), `SELECT state, count(*)::int FROM expiryctl.replay_items WHERE request_id = $1 GROUP BY 1`, request)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
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

// TestReplayRunEndToEnd replays a cohort whose reservations are partly paid
// or already expired by now, through the built binary, into the running
// reference worker: each reservation must transition exactly once, paid
// ones be skipped by the policy's eligibility query, and every item end
// confirmed or skipped.
func TestReplayRunEndToEnd(t *testing.T) {
	t.Parallel()
	const n = 40
	w := newReplayWorld(t, n, "canary_window=1s",
		`eligibility_query=SELECT status <> 'paid', 'reservation ' || id || ' is ' || status FROM reservations.reservations WHERE id = $1`)
	pool := w.db.Pool
	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(5)})
	id := strconv.FormatInt(req.ID, 10)

	t.Run("pending is refused", func(t *testing.T) {
		res := w.cli.exits(t, 4, "replay", "run", id)
		if !strings.Contains(res.stderr, "pending approval") || !strings.Contains(res.stderr, "replay approve "+id) {
			t.Errorf("the refusal should say it waits for approval and how to approve: %s", res)
		}
	})
	w.approve(t, req.ID)

	paid := 0
	for _, s := range w.states {
		if s == "paid" {
			paid++
		}
	}
	t.Run("dry run", func(t *testing.T) {
		res := w.cli.ok(t, "replay", "run", id, "--dry-run", "-o", "json")
		var dry replay.DryRunResult
		decodeJSON(t, res, &dry)
		if dry.Counts["replay"] != n-paid || dry.Counts["skip"] != paid || len(dry.Items) != n {
			t.Errorf("dry run counts %v over %d items, want %d replay and %d skip", dry.Counts, len(dry.Items), n-paid, paid)
		}
		for _, it := range dry.Items {
			if (w.states[it.ReservationID] == "paid") != (it.Action == "skip") || (it.Action == "skip" && !strings.Contains(it.Reason, "is paid")) {
				t.Errorf("dry run item %+v for a %s reservation", it, w.states[it.ReservationID])
			}
		}
		if got := itemStates(t, pool, req.ID); got["pending"] != n {
			t.Errorf("the dry run changed item states: %v", got)
		}
		if ready, _ := newRabbit(t).inspect(t, w.topo.Queue); ready != 0 {
			t.Errorf("the dry run published %d messages", ready)
		}
	})

	t.Run("no consumer is refused", func(t *testing.T) {
		// The sick worker is gone and the fix is not deployed yet.
		res := w.cli.exits(t, 4, "replay", "run", id)
		if !strings.Contains(res.stderr, "has no consumer") || !strings.Contains(res.stderr, "--same-handler-ok") {
			t.Errorf("the refusal should say nothing consumes and what allows it: %s", res)
		}
		if got := itemStates(t, pool, req.ID); got["pending"] != n {
			t.Errorf("the refused run changed item states: %v", got)
		}
	})
	w.runWorker(t)
	var summary replaySummary
	t.Run("run", func(t *testing.T) {
		res := w.cli.ok(t, "replay", "run", id, "-o", "json")
		decodeJSON(t, res, &summary)
		if summary.Status != "completed" || summary.Confirmed != n-paid || summary.Skipped != paid || summary.Failed != 0 ||
			summary.Published != n-paid || summary.RequestID != req.ID {
			t.Errorf("summary %+v: want completed, %d confirmed, %d skipped", summary, n-paid, paid)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	w.assertTransitionedOnce(t, n-paid)
	if got := itemStates(t, pool, req.ID); got["confirmed"] != n-paid || got["skipped"] != paid {
		t.Errorf("item states %v: want every item confirmed or skipped", got)
	}
	if c := count(t, pool, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'replayed'`); c != n-paid {
		t.Errorf("%d letters replayed, want %d", c, n-paid)
	}
	if c := count(t, pool, `SELECT count(*) FROM reservations.processed_jobs WHERE outcome = 'skipped'`); c != count(t, pool, `SELECT count(*) FROM reservations.reservations WHERE status = 'expired' AND id NOT IN (SELECT reservation_id FROM reservations.capacity_releases)`) {
		t.Errorf("the already-expired reservations were not all skipped by the worker")
	}
	for _, action := range []string{"replay.dry_run", "replay.run.start", "replay.canary.start", "replay.canary.pass", "replay.complete"} {
		if c := count(t, pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1 AND actor = 'oncall'`, action); c != 1 {
			t.Errorf("%d %s audit rows, want 1", c, action)
		}
	}

	t.Run("completed is over", func(t *testing.T) {
		res := w.cli.exits(t, 4, "replay", "run", id)
		if !strings.Contains(res.stderr, "completed") {
			t.Errorf("the refusal should say the request completed: %s", res)
		}
	})
	t.Run("bad argument", func(t *testing.T) {
		w.cli.exits(t, 2, "replay", "run", "seven")
	})
}

func intRef(n int) *int { return &n }
