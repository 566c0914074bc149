//go:build faults

package e2e_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
	"github.com/expiryctl/expiryctl/replay"
)

var quorum = amqp.Table{"x-queue-type": "quorum"}

// TestClusterNodeStopAndRestart runs `dlq ingest --follow` and a `replay
// run` against a three-node RabbitMQ cluster, given all three nodes'
// URLs, with a quorum DLQ and a quorum target queue, and stops the node
// both are connected to (the first listed, where the queues were
// declared) in the middle, starting it again five seconds later. Letters
// are published to another node throughout. Both fail over: the replay run
// goes on through another node and completes in the one run. It then
// counts, as the fault suite does, what became of every letter (published
// and confirmed, stored, stored twice, left in the queue, lost) and of
// every replayed item (confirmed, copies that reached the target queue,
// lost): none may be lost or stored twice, and no item sent twice but
// those in flight at the loss.
func TestClusterNodeStopAndRestart(t *testing.T) {
	started := time.Now()
	cluster := servers.StartRabbitMQCluster(t, 3)
	clusterStart := time.Since(started)
	a, c := cluster.Nodes[0], cluster.Nodes[2]
	status := a.Ctl(t, "cluster_status")
	for _, n := range cluster.Nodes {
		if !strings.Contains(status, n.Node) {
			t.Fatalf("node %s is not in the cluster:\n%s", n.Node, status)
		}
	}
	urls := strings.Join(cluster.URLs(), ",")

	// The queues, declared on the node that will be stopped, so that their
	// leaders are there.
	declarer := rabbitAt(t, a.URL)
	const (
		dlq, replayDLQ = "cluster.reservation-expiry.dlq", "cluster.replay.dlq"
		exchange       = "cluster.reservation-expiry"
		target         = "cluster.reservation-expiry.target"
	)
	for _, q := range []string{dlq, replayDLQ, target} {
		if _, err := declarer.ch.QueueDeclare(q, true, false, false, false, quorum); err != nil {
			t.Fatalf("declare quorum queue %s: %v", q, err)
		}
	}
	if err := declarer.ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := declarer.ch.QueueBind(target, "reservation.expire", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = declarer.conn.Close()

	db := pgtest.New(t)
	observer := observerPool(t, db.URL)
	// c is never stopped: the test's own publishing, consuming and
	// inspecting go through it. expiryctl reads each node's management API
	// (derived from its AMQP URL), a's first: while a is down, b's answers.
	env := []string{"EXPIRYCTL_AMQP_URL=" + urls, "EXPIRYCTL_AMQP_HEARTBEAT=1s", "EXPIRYCTL_DB_TIMEOUT=5s"}
	tool := newCLI(db.URL, "e2e-cluster")
	tool.env = append(tool.env, env...)
	viaC := rabbitAt(t, c.URL)

	// The replay's cohort: letters of their own, archived before the run,
	// replayed slowly enough (20 s) to outlast `rabbitmqctl stop`, which
	// keeps the node's connections for up to 13 s on a loaded machine.
	const n = 300
	msgs := workerLetters(1_000_000, n, "db_timeout", "i/o timeout")
	for i := range msgs {
		msgs[i].Headers["x-original-exchange"] = exchange
		msgs[i].Headers["x-handler-version"] = sickVersion
		msgs[i].DeliveryMode = amqp.Persistent
	}
	viaC.publish(t, replayDLQ, msgs...)
	tool.ok(t, "dlq", "ingest", "--queue", replayDLQ)
	ctx := withTimeout(t)
	changes, err := replay.ParsePolicyChanges([]string{"max_rate=1000", "max_cohort=5000", "canary_window=300ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, db.Pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	w := &replayWorld{db: db}
	w.letters = w.ids(t, `SELECT id FROM expiryctl.dead_letters ORDER BY id`)
	if len(w.letters) != n {
		t.Fatalf("%d letters archived, want %d", len(w.letters), n)
	}
	req := w.request(t, replay.NewRequest{Rate: 15, Canary: intRef(10),
		SameHandlerWhy: "cluster test: the consumer only counts what reaches the queue", ViaExchange: true,
		// Jobs 1,000,000 on hold until two years after the epoch: not due,
		// and the test is about the cluster, not about time.
		IncludeNotDue: true})
	w.approve(t, req.ID)
	id := strconv.FormatInt(req.ID, 10)

	// Every copy that reaches the target queue, counted through c.
	copies := countCopies(t, viaC.conn, target, req.ID, w.letters)

	captured := func() int {
		return count(t, observer, "SELECT count(*) FROM expiryctl.dead_letters") - n
	}
	pub := startSteadyPublisher(t, c.URL, dlq)
	ingest := tool.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--batch", "50")
	waitFor(t, 60*time.Second, "the first letters captured", func() bool { return captured() >= 100 })
	run := tool.start(t, "replay", "run", id, "-o", "json")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay run's stderr:\n%s", run.stderr.String())
		}
	})
	waitFor(t, 60*time.Second, "the replay under way", func() bool {
		return run.exited() || itemStates(t, observer, req.ID)["confirmed"] >= 40
	})
	if run.exited() {
		t.Fatalf("the replay ended before the node could be stopped, so it tested nothing: %s", run.res)
	}

	confirmedAtStop := itemStates(t, observer, req.ID)["confirmed"]
	stopped := time.Now()
	// When the run's stderr first says it failed over, and when it ends,
	// timed as they happen.
	failedOver, runEnded := make(chan time.Duration, 1), make(chan time.Duration, 1)
	go func() {
		for !strings.Contains(run.stderr.String(), "failed over to") && !run.exited() {
			time.Sleep(10 * time.Millisecond)
		}
		failedOver <- time.Since(stopped)
		for !run.exited() {
			time.Sleep(10 * time.Millisecond)
		}
		runEnded <- time.Since(stopped)
	}()
	a.Stop(t)
	stopTook := time.Since(stopped)
	capturedAtStop := captured()
	waitFor(t, 60*time.Second, "letters captured again with a node down", func() bool { return captured() > capturedAtStop+20 })
	ingestFailover := time.Since(stopped)
	time.Sleep(5*time.Second - min(ingestFailover, 5*time.Second))
	restarting := time.Now()
	a.Start(t)
	nodeRestart := time.Since(restarting)
	if ingest.exited() {
		t.Fatalf("dlq ingest --follow exited: %s", ingest.res)
	}

	// The replay run fails over to another node and completes: one run.
	first := run.wait(2 * runTimeout)
	sawFailover, replayDone := <-failedOver, <-runEnded
	var summary struct {
		replaySummary
		Failovers []replay.Failover `json:"failovers"`
	}
	if first.code == 0 {
		decodeJSON(t, first, &summary)
	}

	pub.finish()
	confirmed, unknown := int(pub.confirmed.Load()), int(pub.unknown.Load())
	var stored, distinct int
	archive := func() {
		stored = captured()
		distinct = count(t, observer, "SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters") - n
	}
	waitFor(t, 60*time.Second, "the DLQ drained into the archive", func() bool {
		archive()
		return stored >= confirmed && queueReady(t, c.URL, dlq) == 0
	})
	time.Sleep(time.Second) // a batch in flight commits
	archive()
	left := queueReady(t, c.URL, dlq)
	ingest.signal(syscall.SIGINT)
	ingestRes := ingest.wait(30 * time.Second)
	lost := max(confirmed-distinct-left, 0)
	t.Logf("cluster of 3 started in %s; node %s stopped (rabbitmqctl stop took %s): 20 more letters captured %s after the stop began, node started again in %s, replay completed %s after the stop began",
		clusterStart.Round(time.Second), a.Node, stopTook.Round(100*time.Millisecond), ingestFailover.Round(100*time.Millisecond),
		nodeRestart.Round(100*time.Millisecond), replayDone.Round(100*time.Millisecond))
	t.Logf("ingest: published %d confirmed (+%d unconfirmed at the loss); stored %d, stored twice %d, left in the queue %d, lost %d",
		confirmed, unknown, distinct, stored-distinct, left, lost)
	for _, line := range strings.Split(ingestRes.stderr, "\n") {
		if strings.Contains(line, "RabbitMQ") {
			t.Logf("ingest: %s", line)
		}
	}
	if stored != distinct {
		t.Errorf("%d rows for %d distinct letters: some letter was stored twice", stored, distinct)
	}
	if lost > 0 || distinct+left > confirmed+unknown {
		t.Errorf("stored %d + left %d, want the %d confirmed (up to %d more, published unconfirmed at the loss)", distinct, left, confirmed, unknown)
	}
	for _, want := range []string{"lost RabbitMQ: ", "reconnected to RabbitMQ after "} {
		if !strings.Contains(ingestRes.stderr, want) {
			t.Errorf("the ingest's stderr lacks %q:\n%s", want, ingestRes.stderr)
		}
	}
	for _, secret := range []string{"guest:guest@"} {
		if strings.Contains(ingestRes.stderr, secret) || strings.Contains(first.stderr, secret) {
			t.Errorf("a URL's password is shown: %s\n%s", ingestRes.stderr, first.stderr)
		}
	}

	waitFor(t, 30*time.Second, "the target queue to drain", func() bool { return queueReady(t, c.URL, target) == 0 })
	time.Sleep(200 * time.Millisecond) // the last deliveries in flight to the consumer
	states := itemStates(t, observer, req.ID)
	confirmedIDs := w.ids(t, `SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	tl := copies.tally(w.letters, confirmedIDs)
	inFlight := 0
	for _, f := range summary.Failovers {
		inFlight += f.InFlight
	}
	for _, line := range strings.Split(first.stderr, "\n") {
		if strings.Contains(line, "failed over") {
			t.Logf("replay: %s", line)
		}
	}
	took := -1.0
	if len(summary.Failovers) > 0 {
		took = summary.Failovers[0].Took
	}
	t.Logf("replay: approved %d; %d confirmed when node a was stopped; one run, exit %d, %d failover(s), the first taking %.3fs (said on stderr %s after the stop began), %d in flight at the loss; confirmed %d, reached the queue %d (%d copies, %d extra), confirmed without a copy %d, outside the cohort %d, lost %d; republished %d",
		n, confirmedAtStop, first.code, len(summary.Failovers), took, sawFailover.Round(time.Millisecond), inFlight, states["confirmed"], tl.reached, tl.copies,
		tl.copies-tl.reached, tl.withoutCopy, tl.outside, tl.lost, summary.Republished)
	if first.code != 0 || summary.Status != "completed" {
		t.Errorf("the run should fail over and complete in one run: %s", first)
	}
	if len(summary.Failovers) == 0 || !strings.Contains(first.stderr, "lost RabbitMQ node ") {
		t.Errorf("the run should say on stderr which node it lost and which it went on to: %s", first.stderr)
	}
	if tl.withoutCopy != 0 || tl.outside != 0 || tl.lost != 0 || states["confirmed"] != n {
		t.Errorf("want all %d confirmed and on the queue, none outside the cohort: confirmed %d, without a copy %d, outside %d, lost %d",
			n, states["confirmed"], tl.withoutCopy, tl.outside, tl.lost)
	}
	if extra := tl.copies - tl.reached; extra > inFlight {
		t.Errorf("%d extra copies on the queue, but only %d items were in flight at the loss", extra, inFlight)
	}
	if got := count(t, observer, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.failover' AND target = $1`,
		"replay_request:"+id); got != len(summary.Failovers) {
		t.Errorf("%d replay.run.failover audit rows, the run says %d failovers", got, len(summary.Failovers))
	}
}
