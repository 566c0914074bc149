//go:build faults

package e2e_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

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

var quorum = amqp.Table{"x-queue-type": "quorum"}

// TestClusterNodeStopAndRestart runs `dlq ingest --follow` and a `replay
// run` against a three-node RabbitMQ cluster, given all three nodes'
// URLs, with a quorum DLQ and a quorum target queue, and stops the node
// both are connected to (the first listed, where the queues were
// declared) in the middle, starting it again five seconds later. Letters
// are published to another node throughout. It then counts, as the fault
// suite does, what became of every letter (published and confirmed,
// stored, stored twice, left in the queue, lost) and of every replayed
// item (confirmed, copies that reached the target queue, lost): none may
// be lost or stored twice.
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
	// inspecting go through it, and so does the management API.
	env := []string{"EXPIRYCTL_AMQP_URL=" + urls, "EXPIRYCTL_MANAGEMENT_URL=" + c.ManagementURL,
		"EXPIRYCTL_AMQP_HEARTBEAT=1s", "EXPIRYCTL_DB_TIMEOUT=5s"}
	tool := newCLI(db.URL, "e2e-cluster")
	tool.env = append(tool.env, env...)
	viaC := rabbitAt(t, c.URL)

	// The replay's cohort: letters of their own, archived before the run.
	const n = 200
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
	req := w.request(t, replay.NewRequest{Rate: 25, Canary: intRef(10),
		SameHandlerWhy: "cluster test: the consumer only counts what reaches the queue"})
	w.approve(t, req.ID)
	id := strconv.FormatInt(req.ID, 10)

	// Every copy that reaches the target queue, counted through c.
	var (
		mu        sync.Mutex
		delivered = map[int64]int{}
		outside   int
	)
	cch, err := viaC.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := cch.Consume(target, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var consuming sync.WaitGroup
	consuming.Go(func() {
		for d := range deliveries {
			item, isInt := d.Headers[replay.HeaderReplayItem].(int64)
			mu.Lock()
			if !isInt || d.Headers[replay.HeaderReplayRequest] != req.ID || !slices.Contains(w.letters, item) {
				outside++
			} else {
				delivered[item]++
			}
			mu.Unlock()
		}
	})
	t.Cleanup(func() { _ = cch.Close(); consuming.Wait() })

	captured := func() int {
		return count(t, observer, "SELECT count(*) FROM expiryctl.dead_letters") - n
	}
	pub := startSteadyPublisher(t, c.URL, dlq)
	ingest := tool.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--batch", "50")
	waitFor(t, 60*time.Second, "the first letters captured", func() bool { return captured() >= 100 })
	run := tool.start(t, "replay", "run", id, "-o", "json")
	waitFor(t, 60*time.Second, "the replay under way", func() bool {
		return run.exited() || itemStates(t, observer, req.ID)["confirmed"] >= 40
	})
	if run.exited() {
		t.Fatalf("the replay ended before the node could be stopped, so it tested nothing: %s", run.res)
	}

	stopped := time.Now()
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

	// The replay run either rode it out or ended saying RabbitMQ was lost;
	// runs until the request completes, as an operator would.
	first := run.wait(runTimeout)
	confirmedAtLoss := itemStates(t, observer, req.ID)["confirmed"]
	reruns := 0
	deadline := time.Now().Add(2 * runTimeout)
	for w.status(t, req.ID) != "completed" {
		res := tool.run(t, "replay", "run", id, "-o", "json")
		reruns++
		if res.code == 0 {
			break
		}
		switch {
		case time.Now().After(deadline):
			t.Fatalf("the request did not complete: %s", res)
		case res.code == 8 || (res.code == 4 && strings.Contains(res.stderr, "replay approve")):
			w.approve(t, req.ID)
		case res.code == 4 && strings.Contains(res.stderr, "single-runner"):
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("replay run after the node came back failed: %s", res)
		}
	}
	replayDone := time.Since(stopped)

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
	mu.Lock()
	defer mu.Unlock()
	var reached, copies, withoutCopy, lostItems int
	for _, l := range w.letters {
		if delivered[l] > 0 {
			reached++
		} else {
			lostItems++
		}
		copies += delivered[l]
	}
	for _, l := range confirmedIDs {
		if delivered[l] == 0 {
			withoutCopy++
		}
	}
	t.Logf("replay: the run at the stop said: %s", firstError(first.stderr))
	t.Logf("replay: approved %d; first run exit %d with %d confirmed at the loss, %d more runs; confirmed %d, reached the queue %d (%d copies), confirmed without a copy %d, outside the cohort %d, lost %d",
		n, first.code, confirmedAtLoss, reruns, states["confirmed"], reached, copies, withoutCopy, outside, lostItems)
	if first.code != 0 && !strings.Contains(first.stderr, "RabbitMQ") {
		t.Errorf("the interrupted run should say RabbitMQ was lost: %s", first)
	}
	if withoutCopy != 0 || outside != 0 || lostItems != 0 || states["confirmed"] != n {
		t.Errorf("want all %d confirmed and on the queue, none outside the cohort: confirmed %d, without a copy %d, outside %d, lost %d",
			n, states["confirmed"], withoutCopy, outside, lostItems)
	}
}
