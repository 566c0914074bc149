package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// The timeouts the faulted commands run with: short, so that a black hole
// is noticed in seconds, and the bound the test holds them to.
const (
	faultDBTimeout = 2 * time.Second
	faultHeartbeat = time.Second
	// faultDetection bounds the time from a black hole to the command's
	// exit: the silence allowed (db timeout plus a second's grace, or three
	// heartbeats), then a second's grace for each of the few statements
	// that record the failure on the server found silent, and some slack
	// for a loaded machine: three times the 3 s of silence.
	faultDetection = 9 * time.Second
)

// fault is one way the network between expiryctl and a server misbehaves.
type fault struct {
	name string
	// toxics are the toxiproxy toxics, drawn with the case's random source.
	toxics func(rng *rand.Rand) []string
	// midRun adds the toxics once the command has made progress (stored or
	// confirmed some of its work) rather than before it starts.
	midRun bool
	// blackHole says the fault is a server that stops answering: the
	// command must notice, say which server, and exit 5 in bounded time.
	blackHole bool
}

func toxic(kind, stream string, attributes string) string {
	return fmt.Sprintf(`{"type":%q,"stream":%q,"attributes":%s}`, kind, stream, attributes)
}

var faults = []fault{
	{name: "latency", toxics: func(*rand.Rand) []string {
		return []string{toxic("latency", "downstream", `{"latency":500,"jitter":250}`)}
	}},
	{name: "bandwidth", toxics: func(*rand.Rand) []string {
		return []string{toxic("bandwidth", "downstream", `{"rate":32}`), toxic("bandwidth", "upstream", `{"rate":32}`)}
	}},
	{name: "reset_peer", toxics: func(rng *rand.Rand) []string {
		// The connection is reset this long after data first flows on it,
		// a random point of the run.
		return []string{toxic("reset_peer", "downstream", fmt.Sprintf(`{"timeout":%d}`, 100+rng.IntN(900)))}
	}},
	{name: "reset_peer_mid_run", midRun: true, toxics: func(rng *rand.Rand) []string {
		// Added once the run is under way, so that the reset cuts a
		// connection in the middle of its batches, not while it is set up.
		return []string{toxic("reset_peer", "downstream", fmt.Sprintf(`{"timeout":%d}`, rng.IntN(300)))}
	}},
	{name: "timeout", midRun: true, blackHole: true, toxics: func(*rand.Rand) []string {
		// A black hole both ways: nothing arrives, nothing is answered.
		return []string{toxic("timeout", "downstream", `{"timeout":0}`), toxic("timeout", "upstream", `{"timeout":0}`)}
	}},
	{name: "slicer", toxics: func(*rand.Rand) []string {
		return []string{toxic("slicer", "downstream", `{"average_size":32,"size_variation":24,"delay":50}`),
			toxic("slicer", "upstream", `{"average_size":32,"size_variation":24,"delay":50}`)}
	}},
	{name: "limit_data", toxics: func(rng *rand.Rand) []string {
		// The connection is closed after this many bytes from the server.
		return []string{toxic("limit_data", "downstream", fmt.Sprintf(`{"bytes":%d}`, 2000+rng.IntN(30000)))}
	}},
}

// faultRow is one line of the fault table.
type faultRow struct {
	fault, command, server string
	exit                   int
	elapsed                time.Duration
	// landed is false when the command finished before a mid-run fault
	// could be added.
	landed bool
	said   string
	counts string
}

// faultTable collects the rows of the parallel cases.
type faultTable struct {
	mu   sync.Mutex
	rows []faultRow
}

func (ft *faultTable) add(r faultRow) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.rows = append(ft.rows, r)
}

func (ft *faultTable) String() string {
	slices.SortFunc(ft.rows, func(a, b faultRow) int {
		return strings.Compare(a.command+a.server+a.fault, b.command+b.server+b.fault)
	})
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "COMMAND\tSERVER\tFAULT\tEXIT\tTOOK\tCOUNTS (after the faulted run and one healthy run)\tSAID")
	for _, r := range ft.rows {
		took := r.elapsed.Round(100 * time.Millisecond).String()
		if !r.landed {
			took += " (ended before the fault)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.command, r.server, r.fault, r.exit, took, r.counts, r.said)
	}
	_ = w.Flush()
	return b.String()
}

// firstError is the line of stderr that starts with "error:", cut short.
func firstError(stderr string) string {
	for line := range strings.SplitSeq(stderr, "\n") {
		if strings.HasPrefix(line, "error:") {
			if len(line) > 140 {
				line = line[:140] + "…"
			}
			return line
		}
	}
	return ""
}

// faultCLI is a cli whose servers are reached through the proxies (a nil
// proxy: directly), with the short timeouts of the fault suite and the
// management API reached directly.
func faultCLI(t *testing.T, dbURL string, pg, mq *faultProxy) *cli {
	t.Helper()
	amqpURL := amqptest.URL()
	management, err := broker.ManagementURLFor(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	if pg != nil {
		dbURL = pg.through(t, dbURL)
	}
	if mq != nil {
		amqpURL = mq.through(t, amqpURL)
	}
	c := newCLI(dbURL, "e2e-faults")
	c.env = append(c.env, "EXPIRYCTL_AMQP_URL="+amqpURL, "EXPIRYCTL_MANAGEMENT_URL="+management,
		"EXPIRYCTL_DB_TIMEOUT="+faultDBTimeout.String(), "EXPIRYCTL_AMQP_HEARTBEAT="+faultHeartbeat.String())
	return c
}

func hostPort(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// faultedRun starts the command through the proxies with the fault's
// toxics on proxy, added before the start or once progress says the run is
// under way, and waits for it to end, which it must within runTimeout
// whatever the fault. It returns how it ended, when the toxics were added
// and whether they were added before the command ended.
func faultedRun(t *testing.T, c *cli, proxy *faultProxy, f fault, rng *rand.Rand, progress func() bool, args ...string) (result, time.Time, bool) {
	t.Helper()
	toxics := f.toxics(rng)
	var added time.Time
	if !f.midRun {
		proxy.add(t, toxics...)
		added = time.Now()
	}
	p := c.start(t, args...)
	landed := !f.midRun
	if f.midRun {
		deadline := time.Now().Add(runTimeout)
		for !p.exited() && !progress() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !p.exited() {
			proxy.add(t, toxics...)
			added = time.Now()
			landed = true
		}
	}
	res := p.wait(runTimeout)
	proxy.clear()
	return res, added, landed
}

// checkBlackHole holds a black-holed run to its promise: exit 5, in
// bounded time, naming the server that stopped answering.
func checkBlackHole(t *testing.T, res result, added time.Time, landed bool, server string) time.Duration {
	t.Helper()
	if !landed {
		t.Errorf("the command ended before the black hole could be added, so it tested nothing: %s", res)
		return 0
	}
	took := time.Since(added)
	if res.code != 5 {
		t.Errorf("a black-holed %s should end the command with exit 5: %s", server, res)
	}
	if want := server + " at "; !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, "stopped answering") {
		t.Errorf("the error should say that %s stopped answering: %s", server, res)
	}
	if took > faultDetection {
		t.Errorf("the black hole took %s to notice, want at most %s", took, faultDetection)
	}
	return took
}

// TestFaultsIngestAndReplay puts a toxiproxy proxy between expiryctl and
// each of PostgreSQL and RabbitMQ, and runs `dlq ingest` and `replay run`
// through it with each fault: latency, a bandwidth limit, connection resets
// at random points, a black hole, sliced packets and a connection closed
// after some bytes. Each case then runs the command once more on a healthy
// network and counts, as Jepsen would, what became of every letter and
// every item: none lost, none stored twice, none confirmed without reaching
// its queue, none published outside the cohort. The table is logged.
func TestFaultsIngestAndReplay(t *testing.T) {
	t.Parallel()
	base := seed(t)
	table := &faultTable{}
	t.Run("cases", func(t *testing.T) {
		for i, f := range faults {
			for j, server := range []string{"PostgreSQL", "RabbitMQ"} {
				caseSeed := base + uint64(10*i+j)
				t.Run("ingest/"+server+"/"+f.name, func(t *testing.T) {
					t.Parallel()
					table.add(faultIngest(t, f, server, rand.New(rand.NewPCG(caseSeed, 1))))
				})
				t.Run("replay/"+server+"/"+f.name, func(t *testing.T) {
					t.Parallel()
					table.add(faultReplay(t, f, server, rand.New(rand.NewPCG(caseSeed, 2))))
				})
			}
		}
	})
	t.Logf("fault table (seed %d):\n%s", base, table)
}

// faultIngest captures 300 letters through the fault.
func faultIngest(t *testing.T, f fault, server string, rng *rand.Rand) faultRow {
	const letters = 300
	db := pgtest.New(t)
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	r.publish(t, dlq, workerLetters(0, letters, "db_timeout", "i/o timeout")...)
	observer := observerPool(t, db.URL)

	pg := newFaultProxy(t, hostPort(t, db.URL))
	mq := newFaultProxy(t, hostPort(t, amqptest.URL()))
	proxy := map[string]*faultProxy{"PostgreSQL": pg, "RabbitMQ": mq}[server]
	threshold := 20 + rng.IntN(120)
	start := time.Now()
	res, added, landed := faultedRun(t, faultCLI(t, db.URL, pg, mq), proxy, f, rng,
		func() bool { return rows(t, observer) >= threshold },
		"dlq", "ingest", "--queue", dlq, "--batch", "20")
	row := faultRow{fault: f.name, command: "dlq ingest", server: server, exit: res.code, elapsed: time.Since(start), landed: landed, said: firstError(res.stderr)}
	if f.blackHole {
		row.elapsed = checkBlackHole(t, res, added, landed, server)
	}
	if res.code != 0 && res.code != 5 && res.code != 1 {
		t.Errorf("want exit 0, or 1 or 5 naming the failure: %s", res)
	}

	// What the faulted run left: every letter stored or still queued.
	distinct := func() int { return count(t, observer, "SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters") }
	queuedAfterFault := r.settled(t, dlq)
	storedAfterFault := distinct()
	lostInFault := letters - storedAfterFault - queuedAfterFault

	// One healthy run picks up the rest.
	faultCLI(t, db.URL, nil, nil).ok(t, "dlq", "ingest", "--queue", dlq)
	stored, unique, queued := rows(t, observer), distinct(), r.settled(t, dlq)
	twice, lost := stored-unique, letters-unique-queued
	row.counts = fmt.Sprintf("published %d; after the fault: stored %d, queued %d, lost %d; after a healthy run: stored %d, stored twice %d, left in the queue %d, lost %d",
		letters, storedAfterFault, queuedAfterFault, max(lostInFault, 0), stored, twice, queued, max(lost, 0))
	if lostInFault > 0 {
		t.Errorf("%d letters were acknowledged without being stored in the faulted run (%d stored, %d queued of %d)", lostInFault, storedAfterFault, queuedAfterFault, letters)
	}
	if twice != 0 || lost != 0 || queued != 0 || unique != letters {
		t.Errorf("after the healthy run: %d rows for %d letters (%d stored twice), %d queued, %d lost; want each of the %d once", stored, unique, twice, queued, lost, letters)
	}
	return row
}

// faultReplay replays a 120-item cohort through the fault into a queue the
// test consumes.
func faultReplay(t *testing.T, f fault, server string, rng *rand.Rand) faultRow {
	const n = 120
	ctx := withTimeout(t)
	db := pgtest.New(t)
	r := newRabbit(t)
	observer := observerPool(t, db.URL)

	// The target: an exchange and a queue of the test's own, named by the
	// letters as their origin.
	exchange, target := declareReplayTarget(t, r.conn)
	dlq := r.queue(t, ".dlq", nil)
	msgs := workerLetters(0, n, "db_timeout", "i/o timeout")
	for i := range msgs {
		msgs[i].Headers["x-original-exchange"] = exchange
		msgs[i].Headers["x-handler-version"] = sickVersion
	}
	r.publish(t, dlq, msgs...)
	direct := faultCLI(t, db.URL, nil, nil)
	direct.ok(t, "dlq", "ingest", "--queue", dlq)
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
	req := w.request(t, replay.NewRequest{Rate: 100, Canary: intRef(10),
		SameHandlerWhy: "fault test: the consumer only counts what reaches the queue", ViaExchange: true})
	w.approve(t, req.ID)
	id := strconv.FormatInt(req.ID, 10)

	// The consumer counts every copy that reached the target queue.
	copies := countCopies(t, r.conn, target, req.ID, w.letters)

	pg := newFaultProxy(t, hostPort(t, db.URL))
	mq := newFaultProxy(t, hostPort(t, amqptest.URL()))
	proxy := map[string]*faultProxy{"PostgreSQL": pg, "RabbitMQ": mq}[server]
	threshold := 15 + rng.IntN(60)
	start := time.Now()
	res, added, landed := faultedRun(t, faultCLI(t, db.URL, pg, mq), proxy, f, rng,
		func() bool { return itemStates(t, observer, req.ID)["confirmed"] >= threshold },
		"replay", "run", id, "-o", "json")
	row := faultRow{fault: f.name, command: "replay run", server: server, exit: res.code, elapsed: time.Since(start), landed: landed, said: firstError(res.stderr)}
	if f.blackHole {
		row.elapsed = checkBlackHole(t, res, added, landed, server)
	}
	confirmedAfterFault := itemStates(t, observer, req.ID)["confirmed"]

	// Healthy runs until the request completes: a halted run needs a new
	// approval, and a runner whose session PostgreSQL has not yet seen end
	// still holds the request's lock for a moment.
	deadline := time.Now().Add(runTimeout)
	for w.status(t, req.ID) != "completed" {
		res := direct.run(t, "replay", "run", id, "-o", "json")
		if res.code == 0 {
			break
		}
		switch {
		case time.Now().After(deadline):
			t.Fatalf("the request did not complete on a healthy network: %s", res)
		case res.code == 8 || (res.code == 4 && strings.Contains(res.stderr, "replay approve")):
			w.approve(t, req.ID)
		case res.code == 4 && strings.Contains(res.stderr, "single-runner"):
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("the healthy run failed: %s", res)
		}
	}
	waitFor(t, 30*time.Second, "the target queue to drain", func() bool {
		ready, _ := r.inspect(t, target)
		return ready == 0
	})
	time.Sleep(200 * time.Millisecond) // the last deliveries in flight to the consumer

	states := itemStates(t, observer, req.ID)
	confirmedIDs := w.ids(t, `SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	tl := copies.tally(w.letters, confirmedIDs)
	row.counts = fmt.Sprintf("approved %d; confirmed after the fault %d; after a healthy run: confirmed %d, reached the queue %d (%d copies), confirmed without ack %d, outside the cohort %d, lost %d",
		n, confirmedAfterFault, states["confirmed"], tl.reached, tl.copies, tl.withoutCopy, tl.outside, tl.lost)
	if tl.withoutCopy != 0 || tl.outside != 0 || tl.lost != 0 || states["confirmed"] != n {
		t.Errorf("after the healthy run: %s; want all %d confirmed and on the queue, none outside the cohort", row.counts, n)
	}
	return row
}
