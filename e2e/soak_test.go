//go:build soak

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// The soak's settings, each overridable by its environment variable so that
// a short run serves while developing: `make soak` runs the full ten
// minutes at 500 letters a second.
type soakSettings struct {
	duration, faultEvery time.Duration
	rate                 int
	// maxRatio bounds the last minute's mean RSS and goroutines over the
	// first minute's.
	maxRatio float64
}

func soakSettingsFromEnv(t *testing.T) soakSettings {
	t.Helper()
	s := soakSettings{duration: 10 * time.Minute, faultEvery: 30 * time.Second, rate: 500, maxRatio: 1.5}
	duration := func(env string, v *time.Duration) {
		if raw := os.Getenv(env); raw != "" {
			d, err := time.ParseDuration(raw)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a duration such as 90s or 10m", env, raw)
			}
			*v = d
		}
	}
	duration("SOAK_DURATION", &s.duration)
	duration("SOAK_FAULT_EVERY", &s.faultEvery)
	if raw := os.Getenv("SOAK_RATE"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 5000 {
			t.Fatalf("SOAK_RATE=%q: want letters a second, 1 to 5000", raw)
		}
		s.rate = n
	}
	if raw := os.Getenv("SOAK_MAX_RATIO"); raw != "" {
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || f < 1 {
			t.Fatalf("SOAK_MAX_RATIO=%q: want a ratio of 1 or more, such as 1.5", raw)
		}
		s.maxRatio = f
	}
	if s.faultEvery < 10*time.Second {
		t.Fatalf("SOAK_FAULT_EVERY=%s: want 10s or more, for a fault to heal and the capture to come back", s.faultEvery)
	}
	return s
}

// The ingest's silence limits in the soak: shorter than the defaults (31 s
// and 15 s), as an operator who wants an outage noticed in seconds sets
// them, and so that a black hole longer than them fits in a fault period.
// A 4s heartbeat gives RabbitMQ up after 6s of silence.
const (
	soakDBTimeout = 5 * time.Second
	soakHeartbeat = 4 * time.Second
)

// soakRabbitMQSilence is how long the ingest hears nothing from RabbitMQ
// before it gives it up.
var soakRabbitMQSilence = broker.SilenceAllowed(soakHeartbeat)

// soakWorld is what a fault acts on.
type soakWorld struct {
	pg *servers.PostgreSQL
	// pgData is its data directory, where postmaster.pid is.
	pgData string
	rmq    *servers.RabbitMQ
	pgLink *faultProxy
	mqLink *faultProxy
}

// soakFault is one kind of fault; apply returns once the fault has healed.
type soakFault struct {
	name  string
	apply func(t *testing.T, w *soakWorld)
}

// hold puts toxics on links for d, then heals them.
func hold(d time.Duration, toxics []string, links ...func(*soakWorld) *faultProxy) func(*testing.T, *soakWorld) {
	return func(t *testing.T, w *soakWorld) {
		for _, link := range links {
			link(w).add(t, toxics...)
		}
		time.Sleep(d)
		for _, link := range links {
			healed := make(chan struct{})
			go func() { link(w).clear(); close(healed) }()
			select {
			case <-healed:
			case <-time.After(30 * time.Second):
				// The proxy's lock is held for good: fail now, with why,
				// rather than at the test's timeout.
				t.Fatalf("toxiproxy hangs removing a toxic from the %s link (Shopify/toxiproxy#558): the soak cannot go on", link(w).proxy.Upstream)
			}
		}
	}
}

func pgLink(w *soakWorld) *faultProxy { return w.pgLink }
func mqLink(w *soakWorld) *faultProxy { return w.mqLink }

// blackHole passes no byte either way and closes nothing: a host gone
// dead behind a firewall that drops its packets. toxiproxy's timeout toxic
// discards what it holds rather than delivering it late, so a connection
// that outlives it has lost bytes mid-stream and is broken even if the
// silence was short; the soak uses it only for longer than the silence
// limits, where the ingest must notice and reconnect.
var blackHole = []string{toxic("timeout", "downstream", `{"timeout":0}`), toxic("timeout", "upstream", `{"timeout":0}`)}

// freeze stops a server's processes (SIGSTOP) for d and lets them go on
// (SIGCONT): a server frozen in a long pause, or a VM suspended, with the
// kernel still holding its connections and losing no byte. Shorter than
// the silence limits, the ingest must ride it out without a reconnect.
// (toxiproxy cannot stand in: its timeout toxic discards what it holds, and
// removing a latency toxic that holds data from a link that has meanwhile
// closed deadlocks the proxy, Shopify/toxiproxy#558.)
func freeze(d time.Duration, pids func(*testing.T, *soakWorld) []int) func(*testing.T, *soakWorld) {
	return func(t *testing.T, w *soakWorld) {
		stopped := pids(t, w)
		for _, pid := range stopped {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Errorf("SIGSTOP %d: %v", pid, err)
			}
		}
		time.Sleep(d)
		for _, pid := range slices.Backward(stopped) {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %d: %v", pid, err)
			}
		}
	}
}

// postgresProcesses are the private cluster's postmaster, first, and its
// children: all of them, so that no backend answers.
func postgresProcesses(t *testing.T, w *soakWorld) []int {
	b, err := os.ReadFile(filepath.Join(w.pgData, "postmaster.pid"))
	if err != nil {
		t.Fatalf("the private PostgreSQL's postmaster.pid: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster.pid starts %q", first)
	}
	return append([]int{postmaster}, childrenOf(postmaster)...)
}

// rabbitmqProcess is the private node's Erlang VM.
func rabbitmqProcess(t *testing.T, w *soakWorld) []int {
	out := strings.Trim(strings.TrimSpace(w.rmq.Ctl(t, "eval", "os:getpid().")), `"`)
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("the RabbitMQ node's OS pid: rabbitmqctl eval said %q", out)
	}
	return []int{pid}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ")".
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, child)
		}
	}
	return children
}

// resetPeer resets every connection that carries data while it is on, new
// ones included.
var resetPeer = []string{toxic("reset_peer", "downstream", `{"timeout":0}`), toxic("reset_peer", "upstream", `{"timeout":0}`)}

// soakFaults rotate, one every fault period.
var soakFaults = []soakFault{
	{"RabbitMQ link reset (1s)", hold(time.Second, resetPeer, mqLink)},
	{"PostgreSQL link reset (1s)", hold(time.Second, resetPeer, pgLink)},
	{fmt.Sprintf("RabbitMQ frozen 3s (under the %s heartbeat silence)", soakRabbitMQSilence), freeze(3*time.Second, rabbitmqProcess)},
	{"PostgreSQL black hole 10s (over the 5s db timeout)", hold(10*time.Second, blackHole, pgLink)},
	{"latency 500ms±250ms both links (10s)", hold(10*time.Second,
		[]string{toxic("latency", "downstream", `{"latency":500,"jitter":250}`)}, mqLink, pgLink)},
	{"RabbitMQ stop_app 2s, start_app", func(t *testing.T, w *soakWorld) { w.rmq.Restart(t, 2*time.Second) }},
	{"PostgreSQL frozen 3s (under the 5s db timeout)", freeze(3*time.Second, postgresProcesses)},
	{fmt.Sprintf("RabbitMQ black hole 10s (over the %s heartbeat silence)", soakRabbitMQSilence), hold(10*time.Second, blackHole, mqLink)},
	{"PostgreSQL stop 2s, start", func(t *testing.T, w *soakWorld) { w.pg.Restart(t, 2*time.Second) }},
}

// soakFaultRow is one fault of the run, for the table.
type soakFaultRow struct {
	name string
	// at is when it began, since the ingest started; took how long until
	// it healed.
	at, took time.Duration
	// back is how long after the heal a batch was committed again; stall
	// the longest time without a commit from the fault's start to then.
	back, stall time.Duration
	// noticed is how long after the fault began the ingest said it lost a
	// server, if it did.
	noticed   time.Duration
	lost      bool
	recovered bool
	said      string
}

// TestSoakIngestFollow runs `dlq ingest --follow` for SOAK_DURATION (10m)
// against a private PostgreSQL and a private RabbitMQ, each behind a
// toxiproxy link, while letters are published with confirms at SOAK_RATE
// (500/s) and a fault comes every SOAK_FAULT_EVERY (30s), rotating through
// connection resets, black holes shorter and longer than the silence
// limits, latency, and real restarts of both servers. It holds the ingest
// to what an operator leaving it running all incident long needs: its RSS
// and goroutines flat (the last minute's mean over the first's at most
// SOAK_MAX_RATIO, 1.5), capture back after every fault, and every letter
// the broker confirmed archived exactly once once the queue is drained. The
// table of faults, counts and ratios is logged.
func TestSoakIngestFollow(t *testing.T) {
	settings := soakSettingsFromEnv(t)
	pg := servers.StartPostgreSQL(t)
	rmq := servers.StartRabbitMQ(t)
	dbURL := pg.Database(t)
	observer, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(observer.Close)
	const dlq = "reservation-expiry.dlq"
	declareQueues(t, rmq.URL, "reservation-expiry", dlq)
	var pgData string
	if err := observer.QueryRow(context.Background(), "SHOW data_directory").Scan(&pgData); err != nil {
		t.Fatal(err)
	}

	w := &soakWorld{pg: pg, pgData: pgData, rmq: rmq,
		pgLink: newFaultProxy(t, fmt.Sprintf("127.0.0.1:%d", pg.Port)),
		mqLink: newFaultProxy(t, fmt.Sprintf("127.0.0.1:%d", rmq.Port))}
	// The ingester is also an operator, so that its --metrics-listen serves
	// the archive's metrics too, read every 15s through the faulted link as
	// an operator would have them.
	login := pg.Login(t, dbURL, "ingest", "expiryctl_ingester", "expiryctl_operator")
	c := newCLI(w.pgLink.through(t, login), "")
	c.env = append(c.env, "EXPIRYCTL_AMQP_URL="+w.mqLink.through(t, rmq.URL), "EXPIRYCTL_MANAGEMENT_URL="+rmq.ManagementURL,
		"EXPIRYCTL_DB_TIMEOUT="+soakDBTimeout.String(), "EXPIRYCTL_AMQP_HEARTBEAT="+soakHeartbeat.String())

	pub := startRatePublisher(rmq.URL, dlq, settings.rate)
	t.Cleanup(pub.finish)
	ingest := c.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--metrics-listen", "127.0.0.1:0")
	depth := &queueDepth{url: rmq.URL, queue: dlq}
	defer depth.close()
	watch := watchIngest(ingest.cmd.Process.Pid, metricsURL(t, ingest), dlq, depth.ready, ingest.stderr.String)
	t.Cleanup(watch.finish)
	t.Logf("soak: %s at %d letters/s, a fault every %s; ingest pid %d", settings.duration, settings.rate, settings.faultEvery, ingest.cmd.Process.Pid)

	faults := soakFaults
	if only := os.Getenv("SOAK_FAULTS"); only != "" {
		faults = slices.DeleteFunc(slices.Clone(soakFaults), func(f soakFault) bool { return !strings.Contains(f.name, only) })
		if len(faults) == 0 {
			t.Fatalf("SOAK_FAULTS=%q names no fault: each is one of the soak's fault names or part of one", only)
		}
	}
	// The faults come half a period in and every period after, so that the
	// first and the last minute each hold as many.
	var table []soakFaultRow
	for i := 0; ; i++ {
		due := settings.faultEvery/2 + time.Duration(i)*settings.faultEvery
		if due+settings.faultEvery/2 > settings.duration {
			break
		}
		time.Sleep(time.Until(watch.started.Add(due)))
		if ingest.exited() {
			t.Fatalf("dlq ingest --follow exited during the soak: %s", ingest.res)
		}
		f := faults[i%len(faults)]
		said := len(ingest.stderr.String())
		start := time.Now()
		f.apply(t, w)
		healed := time.Now()
		row := soakFaultRow{name: f.name, at: start.Sub(watch.started), took: healed.Sub(start)}
		// Capture must be back before the next fault is due.
		deadline := watch.started.Add(due + settings.faultEvery)
		for time.Now().Before(deadline) {
			if back, ok := watch.advancedAfter(healed); ok {
				row.back, row.recovered = back.Sub(healed), true
				row.stall = watch.longestStall(start, back)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		row.said = reconnectSummary(ingest.stderr.String()[said:])
		if at, ok := watch.firstLoss(start, time.Now()); ok {
			row.noticed, row.lost = at.Sub(start), true
		}
		table = append(table, row)
		t.Logf("soak: %s at %s: healed after %s, capturing again %s later (%s)",
			row.name, row.at.Round(time.Second), row.took.Round(100*time.Millisecond), row.back.Round(100*time.Millisecond), row.said)
	}
	time.Sleep(time.Until(watch.started.Add(settings.duration)))
	if ingest.exited() {
		t.Fatalf("dlq ingest --follow exited during the soak: %s", ingest.res)
	}
	ran := time.Since(watch.started)
	pub.finish()

	// Drained: the queue empty, and nothing committed for two seconds.
	waitFor(t, 2*time.Minute, "the ingest to drain the queue", func() bool {
		before := watch.captured()
		if depth.ready() != 0 {
			return false
		}
		time.Sleep(2 * time.Second)
		return watch.captured() == before && depth.ready() == 0
	})
	watch.finish()
	final, err := scrapeSamples(context.Background(), http.DefaultClient, watch.metricsURL)
	if err != nil {
		t.Fatalf("the last scrape: %v", err)
	}
	ingest.signal(syscall.SIGINT)
	res := ingest.wait(30 * time.Second)
	if res.code != 0 {
		t.Errorf("dlq ingest --follow did not stop cleanly on SIGINT: %s", res)
	}
	// The losses the metrics counted are those stderr told.
	losses := map[string][2]int{}
	for server, label := range map[string]string{"RabbitMQ": "rabbitmq", "PostgreSQL": "postgresql"} {
		counted := final[`expiryctl_ingest_connection_losses_total{queue="`+dlq+`",server="`+label+`"}`]
		told := strings.Count(res.stderr, "\nlost "+server+": ")
		losses[server] = [2]int{int(counted), told}
		if int(counted) != told {
			t.Errorf("expiryctl_ingest_connection_losses_total{server=%q} is %v, but stderr tells of %d losses of %s", label, counted, told, server)
		}
	}

	for line := range strings.SplitSeq(res.stderr, "\n") {
		if strings.HasPrefix(line, "lost ") || strings.HasPrefix(line, "reconnected to ") || strings.Contains(line, " still unavailable after ") ||
			strings.Contains(line, " is back after ") || strings.HasPrefix(line, "warning: ") {
			t.Logf("ingest: %s", line)
		}
	}
	counts := countSoakLetters(t, observer, rmq.URL, dlq, pub.fates())
	span := min(time.Minute, ran/3)
	first, last := watch.window(0, span), watch.window(ran-span, ran)
	rss, goroutines, heap := ratio(first, last, func(s soakSample) float64 { return s.rss }),
		ratio(first, last, func(s soakSample) float64 { return s.goroutines }),
		ratio(first, last, func(s soakSample) float64 { return s.heap })
	t.Logf("soak table (%s at %d/s, ingest pid %d, %d samples, %d failed scrapes, publisher reconnected %d times; losses counted by the metrics/told on stderr: RabbitMQ %d/%d, PostgreSQL %d/%d):\n%s",
		ran.Round(time.Second), settings.rate, ingest.cmd.Process.Pid, len(watch.samples), watch.scrapeErrors, pub.reconnects,
		losses["RabbitMQ"][0], losses["RabbitMQ"][1], losses["PostgreSQL"][0], losses["PostgreSQL"][1],
		soakTable(table, counts, span, rss, goroutines, heap, watch))

	for _, row := range table {
		if !row.recovered {
			t.Errorf("capture was not back within the fault period after %q", row.name)
		}
	}
	if counts.lost != 0 || counts.twice != 0 || counts.stranger != 0 || counts.left != 0 {
		t.Errorf("want every confirmed letter archived once and none left: %+v", counts)
	}
	for name, r := range map[string]ratioReading{"RSS": rss, "goroutines": goroutines} {
		if !(r.ratio() <= settings.maxRatio) {
			t.Errorf("%s grew: last %s mean %.0f over first %s mean %.0f is %.2f×, want at most %.2f×",
				name, span, r.last, span, r.first, r.ratio(), settings.maxRatio)
		}
	}
}

// declareQueues declares durable queues on the broker at url.
func declareQueues(t *testing.T, url string, queues ...string) {
	t.Helper()
	ch := rabbitAt(t, url).ch
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// reconnectSummary is what the ingest said of its connections during a
// fault: how many losses, and the first one's words.
func reconnectSummary(stderr string) string {
	var lost, back int
	var firstLost string
	for line := range strings.SplitSeq(stderr, "\n") {
		switch {
		case strings.HasPrefix(line, "lost "):
			lost++
			if firstLost == "" {
				firstLost = line
				if i := strings.Index(firstLost, "; letters received"); i > 0 {
					firstLost = firstLost[:i]
				}
				if len(firstLost) > 200 {
					firstLost = firstLost[:200] + "…"
				}
			}
		case strings.HasPrefix(line, "reconnected to ") || strings.Contains(line, " is back after "):
			back++
		}
	}
	if lost == 0 {
		return "no loss noticed"
	}
	return fmt.Sprintf("%d lost, %d back: %s", lost, back, firstLost)
}

// soakCounts is what became of the letters published.
type soakCounts struct {
	published, confirmed, unknown int
	// archived is the rows in dead_letters; distinct their message ids.
	archived, distinct int
	// twice is the rows beyond one per letter; stranger the letters
	// archived that were never published; left those still in the queue;
	// lost the confirmed letters neither archived nor left.
	twice, stranger, left, lost int
	// unknownArchived is the unconfirmed letters that did reach the archive.
	unknownArchived int
}

func countSoakLetters(t *testing.T, observer *pgxpool.Pool, url, queue string, fates []byte) soakCounts {
	t.Helper()
	ctx := withTimeout(t)
	seen := map[int]int{}
	c := soakCounts{published: len(fates)}
	rows, err := observer.Query(ctx, `SELECT message_id, count(*) FROM expiryctl.dead_letters GROUP BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		c.archived += n
		c.distinct++
		c.twice += n - 1
		if job, ok := jobOf(id); ok && job < len(fates) && fates[job] != letterUnsent {
			seen[job] += n
		} else {
			c.stranger++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The letters still queued, taken off it to be named.
	ch := rabbitAt(t, url).ch
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		c.left++
		if job, ok := jobOf(d.MessageId); ok && job < len(fates) {
			seen[job]++
		}
	}
	for job, f := range fates {
		switch f {
		case letterConfirmed:
			c.confirmed++
			if seen[job] == 0 {
				c.lost++
			}
		case letterUnknown:
			c.unknown++
			if seen[job] > 0 {
				c.unknownArchived++
			}
		}
	}
	return c
}

// jobOf is the job number of a worker letter's message id
// (expire:r-N:v3).
func jobOf(messageID string) (int, bool) {
	rest, ok := strings.CutPrefix(messageID, "expire:r-")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, ":v3")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// ratioReading is a quantity's mean over the first and the last window.
type ratioReading struct{ first, last float64 }

func (r ratioReading) ratio() float64 { return r.last / r.first }

func ratio(first, last []soakSample, of func(soakSample) float64) ratioReading {
	mean := func(ss []soakSample) float64 {
		var sum float64
		for _, s := range ss {
			sum += of(s)
		}
		return sum / float64(len(ss))
	}
	return ratioReading{first: mean(first), last: mean(last)}
}

func soakTable(rows []soakFaultRow, c soakCounts, span time.Duration, rss, goroutines, heap ratioReading, watch *ingestWatch) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tFAULT\tHEALED AFTER\tLOSS SAID AFTER\tCAPTURING AGAIN AFTER THE HEAL\tLONGEST STALL\tINGEST SAID")
	for _, r := range rows {
		back := r.back.Round(100 * time.Millisecond).String()
		if !r.recovered {
			back = "NOT BACK"
		}
		noticed := "-"
		if r.lost {
			noticed = r.noticed.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.at.Round(time.Second), r.name, r.took.Round(100*time.Millisecond),
			noticed, back, r.stall.Round(100*time.Millisecond), r.said)
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nletters: published %d (confirmed %d, unknown %d of which %d archived); archived %d rows, %d distinct; stored twice %d; never published %d; left in the queue %d; lost %d\n",
		c.published, c.confirmed, c.unknown, c.unknownArchived, c.archived, c.distinct, c.twice, c.stranger, c.left, c.lost)
	maxQueued := 0
	for _, s := range watch.window(0, time.Duration(1<<62)) {
		maxQueued = max(maxQueued, s.queued)
	}
	fmt.Fprintf(&b, "deepest queue seen: %d letters\n", maxQueued)
	tw = tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\nQUANTITY\tFIRST %s MEAN\tLAST %s MEAN\tRATIO\n", span, span)
	fmt.Fprintf(tw, "RSS (VmRSS)\t%.1f MiB\t%.1f MiB\t%.3f\n", rss.first/(1<<20), rss.last/(1<<20), rss.ratio())
	fmt.Fprintf(tw, "goroutines\t%.1f\t%.1f\t%.3f\n", goroutines.first, goroutines.last, goroutines.ratio())
	fmt.Fprintf(tw, "Go heap in use\t%.1f MiB\t%.1f MiB\t%.3f\n", heap.first/(1<<20), heap.last/(1<<20), heap.ratio())
	_ = tw.Flush()
	// Each minute's means, to tell a trend from the two ends' noise.
	tw = tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMINUTE\tRSS MiB\tGOROUTINES\tHEAP MiB\tMEAN QUEUE")
	for from := time.Duration(0); ; from += time.Minute {
		ss := watch.window(from, from+time.Minute)
		if len(ss) == 0 {
			break
		}
		var r, g, h, q float64
		for _, s := range ss {
			r, g, h, q = r+s.rss, g+s.goroutines, h+s.heap, q+float64(max(s.queued, 0))
		}
		n := float64(len(ss))
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.0f\n", int(from/time.Minute)+1, r/n/(1<<20), g/n, h/n/(1<<20), q/n)
	}
	_ = tw.Flush()
	return b.String()
}
