package e2e_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
	"github.com/expiryctl/expiryctl/replay"
)

// rabbitAt is a rabbit (a confirming channel) on the node at url.
func rabbitAt(t *testing.T, url string) *rabbit {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return &rabbit{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 10000))}
}

// restartCohort is an approved replay of letters captured from the broker
// at amqpURL, whose target is a durable queue bound to an exchange of the
// test's own there, so that what reached the queue is still there after a
// restart of the broker and counted at the end.
type restartCohort struct {
	amqpURL          string
	exchange, target string
	letters          []int64
	req              replay.Request
}

// newRestartCohort archives n letters through `dlq ingest` (as tool) and
// has approver approve a replay of all of them at rate per second, made by
// requester.
func newRestartCohort(t *testing.T, tool *cli, amqpURL string, requester, approver *pgxpool.Pool, n int, rate float64) *restartCohort {
	t.Helper()
	c := &restartCohort{amqpURL: amqpURL, exchange: amqptest.Name(t, ".x"), target: amqptest.Name(t, ".target")}
	dlq := amqptest.Name(t, ".dlq")
	r := rabbitAt(t, amqpURL)
	for _, q := range []string{dlq, c.target} {
		if _, err := r.ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.ch.ExchangeDeclare(c.exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.ch.QueueBind(c.target, "reservation.expire", c.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	// On the machine's broker the names must not outlive the test; a
	// private node goes with it.
	t.Cleanup(func() {
		if ch, err := r.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(dlq, false, false, false)
			_, _ = ch.QueueDelete(c.target, false, false, false)
			_ = ch.ExchangeDelete(c.exchange, false, false)
			_ = ch.Close()
		}
	})
	msgs := workerLetters(1, n, "db_timeout", "i/o timeout")
	for i := range msgs {
		msgs[i].Headers["x-original-exchange"] = c.exchange
		msgs[i].Headers["x-handler-version"] = sickVersion
	}
	r.publish(t, dlq, msgs...)
	tool.ok(t, "dlq", "ingest", "--queue", dlq)

	ctx := withTimeout(t)
	changes, err := replay.ParsePolicyChanges([]string{"max_rate=1000", "max_cohort=5000", "canary_window=300ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, requester, "admin", changes); err != nil {
		t.Fatal(err)
	}
	c.letters = idsOn(t, requester, `SELECT id FROM expiryctl.dead_letters WHERE original_exchange = $1 ORDER BY id`, c.exchange)
	if len(c.letters) != n {
		t.Fatalf("%d letters archived, want %d", len(c.letters), n)
	}
	created, err := (&replay.Service{Pool: requester, Actor: "requester"}).Create(ctx, replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: c.letters}, Why: "INC-16 restart drill", Rate: rate, Canary: intRef(10),
		SameHandlerWhy: "restart test: the queue only counts what reaches it", ViaExchange: true})
	if err != nil {
		t.Fatal(err)
	}
	c.req = created.Request
	if _, err := (&replay.Service{Pool: approver, Actor: "approver"}).Approve(ctx, c.req.ID,
		replay.ReviewOptions{Why: "checked", CohortHash: c.req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	return c
}

// restartTally is what became of a cohort replayed across a restart.
type restartTally struct {
	approved, confirmed int
	// copies are the messages on the target queue; reached the items
	// with at least one; lost the approved items with none.
	copies, reached, lost int
	// outside counts copies of no item of the request.
	outside int
	// confirmedTwice counts items confirmed before the restart that
	// reached the queue more than once: a resume published them again.
	confirmedTwice int
}

// tally takes every message off the target queue and counts them against
// the cohort; confirmedBefore are the items confirmed when the run stopped.
func (c *restartCohort) tally(t *testing.T, states map[string]int, confirmedBefore []int64) restartTally {
	t.Helper()
	r := rabbitAt(t, c.amqpURL)
	copies := map[int64]int{}
	var tl restartTally
	for {
		d, ok, err := r.ch.Get(c.target, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		tl.copies++
		item, isInt := d.Headers[replay.HeaderReplayItem].(int64)
		if !isInt || d.Headers[replay.HeaderReplayRequest] != c.req.ID || !slices.Contains(c.letters, item) {
			tl.outside++
			continue
		}
		copies[item]++
	}
	tl.approved, tl.confirmed = len(c.letters), states["confirmed"]
	for _, l := range c.letters {
		if copies[l] > 0 {
			tl.reached++
		} else {
			tl.lost++
		}
	}
	for _, l := range confirmedBefore {
		if copies[l] != 1 {
			tl.confirmedTwice++
		}
	}
	return tl
}

// check fails t unless every approved item is confirmed and on the queue,
// none outside the cohort, none confirmed before the stop sent again, and
// the extra copies no more than the items in flight at the stop.
func (tl restartTally) check(t *testing.T, inFlight int) {
	t.Helper()
	if tl.confirmed != tl.approved || tl.lost != 0 || tl.outside != 0 || tl.confirmedTwice != 0 {
		t.Errorf("want all %d confirmed and on the queue, none outside the cohort or confirmed twice: confirmed %d, lost %d, outside %d, confirmed twice %d",
			tl.approved, tl.confirmed, tl.lost, tl.outside, tl.confirmedTwice)
	}
	if extra := tl.copies - tl.outside - tl.reached; extra > inFlight {
		t.Errorf("%d extra copies on the queue, but only %d items were in flight (publishing) at the stop", extra, inFlight)
	}
}

// idsOn reads a column of ids.
func idsOn(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := pool.Query(withTimeout(t), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// pollCount is count through a server that may be restarting: it asks
// again until the server answers.
func pollCount(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var n int
		err := pool.QueryRow(ctx, query, args...).Scan(&n)
		cancel()
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", query, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resumeUntilCompleted runs the request again, as an operator would, until
// it completes: a lock the database has not freed yet is waited for.
func resumeUntilCompleted(t *testing.T, tool *cli, id int64) (result, int) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for runs := 1; ; runs++ {
		res := tool.run(t, "replay", "run", strconv.FormatInt(id, 10), "-o", "json")
		switch {
		case res.code == 0:
			return res, runs
		case time.Now().After(deadline) || !(res.code == 4 && strings.Contains(res.stderr, "single-runner")):
			t.Fatalf("the resume failed: %s", res)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var inDoubtSaid = regexp.MustCompile(`(\d+) published items? (?:got no confirm|(?:is|are) left publishing)`)

// saidInDoubt is how many items the interrupted run said it leaves in doubt
// (0 when it said none is).
func saidInDoubt(stderr string) int {
	if m := inDoubtSaid.FindStringSubmatch(stderr); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// TestReplayRunAcrossRabbitMQRestart restarts a private RabbitMQ node
// (stop_app, start_app) under a `replay run` given only that node: the run
// ends saying RabbitMQ was lost (exit 5) with the command that resumes it,
// the request stays running, and the resume completes it. Counted on the
// target queue, a durable queue whose persistent messages outlive the
// restart: nothing lost, nothing outside the cohort, nothing confirmed
// before the stop sent again, the extra copies at most the items in flight.
func TestReplayRunAcrossRabbitMQRestart(t *testing.T) {
	t.Parallel()
	started := time.Now()
	rmq := servers.StartRabbitMQ(t)
	db := pgtest.New(t)
	tool := newCLI(db.URL, "oncall")
	tool.env = append(tool.env, "EXPIRYCTL_AMQP_URL="+rmq.URL, "EXPIRYCTL_MANAGEMENT_URL="+rmq.ManagementURL, "EXPIRYCTL_AMQP_HEARTBEAT=1s")
	approver := db.GrantedLogin(t, "approver", "expiryctl_approver")
	const n = 200
	// At 10/s the run has 16 s to go when the stop begins: stop_app takes
	// 3 to 6 s here, long enough for a run at 50/s to complete before the
	// node went away, and then the test tested nothing.
	c := newRestartCohort(t, tool, rmq.URL, db.Pool, approver.Pool, n, 10)
	confirmed := func() int {
		return count(t, db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, c.req.ID)
	}
	id := strconv.FormatInt(c.req.ID, 10)
	run := tool.start(t, "replay", "run", id, "-o", "json")
	waitFor(t, 30*time.Second, "the run to confirm 40 items", func() bool { return confirmed() >= 40 || run.exited() })
	if run.exited() {
		t.Fatalf("the run ended before the restart, so it tested nothing: %s", run.res)
	}
	stopping := time.Now()
	rmq.StopApp(t)
	stopTook := time.Since(stopping)
	interrupted := run.wait(runTimeout)
	states := itemStates(t, db.Pool, c.req.ID)
	confirmedBefore := idsOn(t, db.Pool, `SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, c.req.ID)
	inFlight := states["publishing"]
	status := pollCount(t, db.Pool, `SELECT count(*) FROM expiryctl.replay_requests WHERE id = $1 AND status = 'running'`, c.req.ID)
	rmq.StartApp(t)
	resumedAt := time.Now()
	_, runs := resumeUntilCompleted(t, tool, c.req.ID)
	resumeTook := time.Since(resumedAt)

	final := itemStates(t, db.Pool, c.req.ID)
	tl := c.tally(t, final, confirmedBefore)
	t.Logf("RabbitMQ stop_app (took %s) under replay run: approved %d; the run ended with exit %d, %d confirmed, %d left publishing (it said %d in doubt); %d resume run(s) completing in %s; confirmed %d, copies on the queue %d, reached %d, lost %d, outside the cohort %d, confirmed twice %d; test took %s",
		stopTook.Round(100*time.Millisecond), n, interrupted.code, len(confirmedBefore), inFlight, saidInDoubt(interrupted.stderr), runs,
		resumeTook.Round(time.Millisecond), tl.confirmed, tl.copies, tl.reached, tl.lost, tl.outside, tl.confirmedTwice, time.Since(started).Round(time.Second))
	t.Logf("the interrupted run said: %s", firstError(interrupted.stderr))
	resume := "`expiryctl replay run " + id + "` again to resume"
	if interrupted.code != 5 || !strings.Contains(interrupted.stderr, "RabbitMQ") || !strings.Contains(interrupted.stderr, resume) {
		t.Errorf("the run at the restart should exit 5 saying RabbitMQ was lost and how to resume (%q): %s", resume, interrupted)
	}
	if status != 1 {
		t.Errorf("request %d is not running after the interrupted run: a resume could not go on", c.req.ID)
	}
	if strings.Contains(interrupted.stderr, "failed over") {
		t.Errorf("with one URL the run should not fail over: %s", interrupted.stderr)
	}
	tl.check(t, inFlight)
}

// TestReplayRunAcrossPostgreSQLRestart restarts a private PostgreSQL (a
// fast shutdown, a second down, a start) under a `replay run`: the run
// ends, the runner's lock going with its session, with the command that
// resumes it and an honest count of the items it leaves in doubt (sent and
// not recorded confirmed: some the broker acked while the database was
// gone); the request stays running and the resume completes it. Counted as
// for the RabbitMQ restart.
func TestReplayRunAcrossPostgreSQLRestart(t *testing.T) {
	t.Parallel()
	started := time.Now()
	pg := servers.StartPostgreSQL(t)
	dbURL := pg.Database(t)
	admin := observerPool(t, dbURL)
	approverPool := observerPool(t, pg.Login(t, dbURL, "approver", "expiryctl_approver"))
	ingest := newCLI(pg.Login(t, dbURL, "ingest", "expiryctl_ingester"), "")
	operator := newCLI(pg.Login(t, dbURL, "operator", "expiryctl_operator"), "")
	management, err := broker.ManagementURLFor(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	operator.env = append(operator.env, "EXPIRYCTL_MANAGEMENT_URL="+management, "EXPIRYCTL_DB_TIMEOUT=5s")
	const n = 200
	c := newRestartCohort(t, ingest, amqptest.URL(), admin, approverPool, n, 50)
	id := strconv.FormatInt(c.req.ID, 10)
	confirmed := func() int {
		return pollCount(t, admin, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, c.req.ID)
	}
	run := operator.start(t, "replay", "run", id, "-o", "json")
	waitFor(t, 30*time.Second, "the run to confirm 40 items", func() bool { return confirmed() >= 40 || run.exited() })
	if run.exited() {
		t.Fatalf("the run ended before the restart, so it tested nothing: %s", run.res)
	}
	restarting := time.Now()
	pg.Restart(t, time.Second)
	restartTook := time.Since(restarting)
	interrupted := run.wait(runTimeout)
	confirmedBefore := idsOn(t, admin, `SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, c.req.ID)
	inFlight := pollCount(t, admin, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'publishing'`, c.req.ID)
	status := pollCount(t, admin, `SELECT count(*) FROM expiryctl.replay_requests WHERE id = $1 AND status = 'running'`, c.req.ID)
	// What reached the queue before the resume, confirmed or not.
	onQueueBefore := queueReady(t, c.amqpURL, c.target)
	resumedAt := time.Now()
	_, runs := resumeUntilCompleted(t, operator, c.req.ID)
	resumeTook := time.Since(resumedAt)

	final := itemStates(t, admin, c.req.ID)
	tl := c.tally(t, final, confirmedBefore)
	said := saidInDoubt(interrupted.stderr)
	t.Logf("PostgreSQL restart (took %s) under replay run: approved %d; the run ended with exit %d, %d confirmed, %d on the queue, %d left publishing (it said %d in doubt); %d resume run(s) completing in %s; confirmed %d, copies on the queue %d, reached %d, lost %d, outside the cohort %d, confirmed twice %d; test took %s",
		restartTook.Round(100*time.Millisecond), n, interrupted.code, len(confirmedBefore), onQueueBefore, inFlight, said, runs,
		resumeTook.Round(time.Millisecond), tl.confirmed, tl.copies, tl.reached, tl.lost, tl.outside, tl.confirmedTwice, time.Since(started).Round(time.Second))
	t.Logf("the interrupted run said: %s", strings.TrimSpace(interrupted.stderr))
	resume := "`expiryctl replay run " + id + "` again to resume"
	if interrupted.code != 5 || !strings.Contains(interrupted.stderr, resume) {
		t.Errorf("the run at the restart should stop with exit 5 (the server went away) and the command that resumes it (%q): %s", resume, interrupted)
	}
	if status != 1 {
		t.Errorf("request %d is not running after the interrupted run: a resume could not go on", c.req.ID)
	}
	// The items sent and not recorded confirmed are the ones the run
	// could not account for; it must not say fewer than went out twice.
	if extra := onQueueBefore - len(confirmedBefore); extra > said {
		t.Errorf("%d items reached the queue without their confirm recorded, but the run said only %d are in doubt", extra, said)
	}
	// Only the items in doubt can reach the queue twice: the others left
	// publishing were marked and never sent.
	tl.check(t, said)
}
