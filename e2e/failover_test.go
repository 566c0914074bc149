//go:build faults

package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
	"github.com/expiryctl/expiryctl/replay"
)

// failoverCluster is a private primary with a streaming replica, and the
// URLs that name both, as a deployment with a replica does.
type failoverCluster struct {
	primary, replica *servers.PostgreSQL
	// dbURL is the database's URL as the superuser, naming both hosts.
	dbURL string
	// observer is the test's own pool through both hosts: it follows the
	// failover as expiryctl must.
	observer *pgxpool.Pool
}

func newFailoverCluster(t *testing.T) *failoverCluster {
	t.Helper()
	primary := servers.StartPostgreSQL(t)
	onPrimary := primary.Database(t)
	replica := primary.StartReplica(t)
	fc := &failoverCluster{primary: primary, replica: replica, dbURL: servers.HostsURL(t, onPrimary, primary, replica)}
	fc.observer = observerPool(t, fc.dbURL)
	return fc
}

// login creates a login on the primary (the replica receives it) and
// returns a cli reaching both hosts as it.
func (fc *failoverCluster) login(t *testing.T, person string, groups ...string) *cli {
	t.Helper()
	return newCLI(servers.HostsURL(t, fc.primary.Login(t, fc.dbURL, person, groups...), fc.primary, fc.replica), "")
}

// failover stops the primary with a fast shutdown (which sends the replica
// every WAL record written before it ends) and promotes the replica, and
// returns when the promoted replica accepts writes.
func (fc *failoverCluster) failover(t *testing.T) time.Time {
	t.Helper()
	fc.primary.Stop(t)
	time.Sleep(time.Second) // the clients notice the primary is gone
	fc.replica.Promote(t)
	return time.Now()
}

// poll runs a count on the observer, waiting through the failover.
func (fc *failoverCluster) poll(query string, args ...any) int {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var n int
		err := fc.observer.QueryRow(ctx, query, args...).Scan(&n)
		cancel()
		if err == nil {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFailoverPostgreSQL fails a PostgreSQL primary over to its streaming
// replica (stop the primary, pg_ctl promote the replica) under a `dlq
// ingest --follow` and under a `replay run`, expiryctl given both hosts
// with target_session_attrs=read-write. The ingest must find the new
// primary by itself and lose or double no letter; the run must stop with
// the command that resumes it, which then completes on the new primary
// with no item confirmed twice; and `audit verify` must verify the chain
// on the promoted server. Counted as the fault suite counts.
func TestFailoverPostgreSQL(t *testing.T) {
	t.Parallel()
	t.Run("ingest", func(t *testing.T) { t.Parallel(); failoverIngest(t) })
	t.Run("replay", func(t *testing.T) { t.Parallel(); failoverReplay(t) })
}

func failoverIngest(t *testing.T) {
	fc := newFailoverCluster(t)
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	archived := func() (rows, distinct int) {
		return fc.poll("SELECT count(*) FROM expiryctl.dead_letters"),
			fc.poll("SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters")
	}

	pub := startSteadyPublisher(t, amqptest.URL(), dlq)
	ingest := fc.login(t, "ingest", "expiryctl_ingester").start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--batch", "50")
	waitFor(t, 60*time.Second, "the first letters archived", func() bool { n, _ := archived(); return n >= 100 })
	beforeFailover, _ := archived()
	promoted := fc.failover(t)
	waitFor(t, 90*time.Second, "letters archived on the promoted replica", func() bool {
		n, _ := archived()
		return n > beforeFailover+20
	})
	recovery := time.Since(promoted)
	if ingest.exited() {
		t.Fatalf("dlq ingest --follow exited at the failover: %s", ingest.res)
	}

	pub.finish()
	confirmed, unknown := int(pub.confirmed.Load()), int(pub.unknown.Load())
	waitFor(t, 60*time.Second, "the queue drained into the archive", func() bool {
		n, _ := archived()
		return n >= confirmed && queueReady(t, amqptest.URL(), dlq) == 0
	})
	ingest.signal(syscall.SIGINT)
	res := ingest.wait(30 * time.Second)
	rows, distinct := archived()
	left := r.settled(t, dlq)
	t.Logf("failover under dlq ingest --follow: archived %d before it; archiving again %s after the promotion; published %d confirmed (+%d unconfirmed); archived %d rows, %d distinct; left in the queue %d; stored twice %d, lost %d",
		beforeFailover, recovery.Round(time.Millisecond), confirmed, unknown, rows, distinct, left, rows-distinct, max(confirmed-distinct-left, 0))
	if rows != distinct {
		t.Errorf("%d rows for %d distinct letters: some letter was stored twice", rows, distinct)
	}
	if distinct+left < confirmed || distinct+left > confirmed+unknown {
		t.Errorf("archived %d + left %d, want the %d confirmed (up to %d more, published unconfirmed)", distinct, left, confirmed, unknown)
	}
	for _, want := range []string{"lost PostgreSQL: ", "PostgreSQL is back after "} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the ingest's stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	for line := range strings.SplitSeq(res.stderr, "\n") {
		if strings.Contains(line, "PostgreSQL") {
			t.Logf("ingest: %s", line)
		}
	}
	verifyOnPromoted(t, fc)
}

// verifyOnPromoted runs `audit verify` as an auditor on the promoted
// replica: the chain written on the old primary and continued on the new
// one verifies.
func verifyOnPromoted(t *testing.T, fc *failoverCluster) {
	t.Helper()
	auditor := newCLI(servers.HostsURL(t, fc.replica.Login(t, fc.dbURL, "auditor", "expiryctl_auditor"), fc.replica), "")
	res := auditor.ok(t, "audit", "verify")
	t.Logf("audit verify on the promoted replica: %s", strings.TrimSpace(res.stdout))
}

func failoverReplay(t *testing.T) {
	const n = 300
	fc := newFailoverCluster(t)
	r := newRabbit(t)
	ctx := withTimeout(t)

	exchange, target := declareReplayTarget(t, r.conn)
	dlq := r.queue(t, ".dlq", nil)
	msgs := workerLetters(0, n, "db_timeout", "i/o timeout")
	for i := range msgs {
		msgs[i].Headers["x-original-exchange"] = exchange
		msgs[i].Headers["x-handler-version"] = sickVersion
	}
	r.publish(t, dlq, msgs...)
	fc.login(t, "ingest", "expiryctl_ingester").ok(t, "dlq", "ingest", "--queue", dlq)

	// The request is made as the superuser and approved by a login of the
	// approvers: four-eyes compares logins.
	admin, err := pgxpool.New(ctx, fc.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	changes, err := replay.ParsePolicyChanges([]string{"max_rate=1000", "max_cohort=5000", "canary_window=300ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, admin, "admin", changes); err != nil {
		t.Fatal(err)
	}
	letters := idsOn(t, admin, `SELECT id FROM expiryctl.dead_letters ORDER BY id`)
	if len(letters) != n {
		t.Fatalf("%d letters archived, want %d", len(letters), n)
	}
	created, err := (&replay.Service{Pool: admin, Actor: "requester"}).Create(ctx, replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: letters}, Why: "INC-9 failover drill",
		Rate: 60, Canary: intRef(10), SameHandlerWhy: "failover test: the consumer only counts what reaches the queue",
		ViaExchange: true})
	if err != nil {
		t.Fatal(err)
	}
	req := created.Request
	approverURL := servers.HostsURL(t, fc.primary.Login(t, fc.dbURL, "approver", "expiryctl_approver"), fc.primary, fc.replica)
	approver, err := pgxpool.New(ctx, approverURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(approver.Close)
	if _, err := (&replay.Service{Pool: approver, Actor: "approver"}).Approve(ctx, req.ID,
		replay.ReviewOptions{Why: "checked", CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(req.ID, 10)

	copies := countCopies(t, r.conn, target, req.ID, letters)

	management, err := broker.ManagementURLFor(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	operator := fc.login(t, "operator", "expiryctl_operator")
	operator.env = append(operator.env, "EXPIRYCTL_MANAGEMENT_URL="+management)
	confirmed := func() int {
		return fc.poll(`SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	}
	run := operator.start(t, "replay", "run", id, "-o", "json")
	waitFor(t, 60*time.Second, "the run to confirm 60 items", func() bool { return confirmed() >= 60 || run.exited() })
	if run.exited() {
		t.Fatalf("the run ended before the failover: %s", run.res)
	}
	confirmedBefore := confirmed()
	// The run's end is timed as it happens, during the failover.
	ended := make(chan time.Time, 1)
	go func() {
		for !run.exited() {
			time.Sleep(10 * time.Millisecond)
		}
		ended <- time.Now()
	}()
	stopped := time.Now()
	promoted := fc.failover(t)
	interrupted := run.wait(runTimeout)
	endedAt := <-ended
	noticed := endedAt.Sub(stopped)
	when := fmt.Sprintf("%s after the promotion", endedAt.Sub(promoted).Round(time.Millisecond))
	if endedAt.Before(promoted) {
		when = "before the promotion"
	}
	time.Sleep(200 * time.Millisecond) // the last deliveries in flight to the consumer
	deliveredBeforeResume, _ := copies.counts()
	resume := fmt.Sprintf("`expiryctl replay run %d` again to resume", req.ID)
	if interrupted.code != 5 || !strings.Contains(interrupted.stderr, resume) {
		t.Errorf("the run at the failover should stop with exit 5 (the server went away) and the command that resumes it (%q): %s", resume, interrupted)
	}
	// The items confirmed when the old primary went, as the promoted
	// replica holds them: a resume must not publish one of them again.
	confirmedAtFailover := map[int64]bool{}
	for _, l := range idsOn(t, fc.observer, `SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID) {
		confirmedAtFailover[l] = true
	}
	// Items left publishing: sent, their confirm not recorded (the broker's
	// ack may have come while PostgreSQL was going); the resume publishes
	// them again, and only they may reach the queue twice.
	publishing := fc.poll(`SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'publishing'`, req.ID)
	awaiting := -1
	if m := regexp.MustCompile(`(\d+) published items? (?:got no confirm|(?:is|are) left publishing)`).FindStringSubmatch(interrupted.stderr); m != nil {
		awaiting, _ = strconv.Atoi(m[1])
	}

	// Resume on the new primary until the request completes: the old
	// runner's lock went with the old primary's sessions.
	resumedAt := time.Now()
	var resumes int
	deadline := time.Now().Add(runTimeout)
	for {
		res := operator.run(t, "replay", "run", id, "-o", "json")
		resumes++
		if res.code == 0 {
			break
		}
		if time.Now().After(deadline) || !(res.code == 4 && strings.Contains(res.stderr, "single-runner")) {
			t.Fatalf("the resumed run on the promoted replica failed: %s", res)
		}
		time.Sleep(200 * time.Millisecond)
	}
	resumeTook := time.Since(resumedAt)
	waitFor(t, 30*time.Second, "the target queue to drain", func() bool {
		ready, _ := r.inspect(t, target)
		return ready == 0
	})
	time.Sleep(200 * time.Millisecond) // the last deliveries in flight to the consumer

	states := itemStates(t, fc.observer, req.ID)
	tl := copies.tally(letters, nil)
	delivered, _ := copies.counts()
	var confirmedTwice, sentUnrecorded int
	for _, l := range letters {
		if deliveredBeforeResume[l] > 0 && !confirmedAtFailover[l] {
			sentUnrecorded++
		}
		if confirmedAtFailover[l] && delivered[l] != 1 {
			confirmedTwice++
		}
	}
	t.Logf("failover under replay run: approved %d; confirmed %d before the stop, %d at the failover, %d left publishing (the run said %d are in doubt); %d reached the queue without their confirm recorded; the run ended %s after the primary stopped (exit %d), %s; %d resume run(s) completing in %s; confirmed %d, reached the queue %d (%d copies, %d extra), confirmed at the failover and published again %d, outside the cohort %d, lost %d",
		n, confirmedBefore, len(confirmedAtFailover), publishing, awaiting, sentUnrecorded, noticed.Round(time.Millisecond), interrupted.code, when,
		resumes, resumeTook.Round(time.Millisecond), states["confirmed"], tl.reached, tl.copies, tl.copies-tl.reached, confirmedTwice, tl.outside, tl.lost)
	t.Logf("the interrupted run said: %s", firstError(interrupted.stderr))
	if states["confirmed"] != n || tl.lost != 0 || tl.outside != 0 {
		t.Errorf("want all %d confirmed and on the queue, none outside the cohort: confirmed %d, lost %d, outside %d", n, states["confirmed"], tl.lost, tl.outside)
	}
	if confirmedTwice != 0 {
		t.Errorf("%d items confirmed before the failover were published again by the resume: confirmed twice", confirmedTwice)
	}
	// Only an item that reached the queue before the failover without its
	// confirm recorded may reach it twice.
	if extra := tl.copies - tl.reached; extra > sentUnrecorded {
		t.Errorf("%d extra copies on the queue, but only %d items reached it unconfirmed before the failover", extra, sentUnrecorded)
	}
	if status := fc.poll(`SELECT count(*) FROM expiryctl.replay_requests WHERE id = $1 AND status = 'completed'`, req.ID); status != 1 {
		t.Errorf("request %d is not completed after the resume", req.ID)
	}
	verifyOnPromoted(t, fc)
}
