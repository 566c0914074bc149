package e2e_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// steadyPublisher publishes letters one at a time to a queue, each waited
// for until the broker confirms it, reconnecting when the broker goes: a
// confirmed letter is in the queue; one whose publish or confirm failed
// may or may not be (unknown).
type steadyPublisher struct {
	confirmed, unknown atomic.Int64
	stop               context.CancelFunc
	done               chan struct{}
}

func startSteadyPublisher(t *testing.T, url, queue string) *steadyPublisher {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := &steadyPublisher{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		n := 0
		for ctx.Err() == nil {
			conn, err := amqp.Dial(url)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			ch, err := conn.Channel()
			if err == nil {
				err = ch.Confirm(false)
			}
			for err == nil && ctx.Err() == nil {
				msg := workerLetters(n, 1, "db_timeout", "i/o timeout")[0]
				msg.DeliveryMode = amqp.Persistent
				var dc *amqp.DeferredConfirmation
				if dc, err = ch.PublishWithDeferredConfirm("", queue, false, false, msg); err == nil {
					waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
					var ok bool
					ok, err = dc.WaitContext(waitCtx)
					cancel()
					if err == nil && !ok {
						err = io.ErrUnexpectedEOF
					}
				}
				n++
				if err != nil {
					p.unknown.Add(1)
					break
				}
				p.confirmed.Add(1)
				time.Sleep(4 * time.Millisecond)
			}
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { p.stop(); <-p.done })
	return p
}

func (p *steadyPublisher) finish() { p.stop(); <-p.done }

// TestFollowSurvivesRestarts restarts a private RabbitMQ node (stop_app,
// start_app) and then a private PostgreSQL cluster under a `dlq ingest
// --follow` and a `metrics serve`, letters published throughout: the
// ingest is still running after both, every confirmed letter is archived
// once, and the exporter's readings recover.
func TestFollowSurvivesRestarts(t *testing.T) {
	t.Parallel()
	pg := servers.StartPostgreSQL(t)
	rmq := servers.StartRabbitMQ(t)
	dbURL := pg.Database(t)
	observer, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(observer.Close)

	const work, dlq = "reservation-expiry", "reservation-expiry.dlq"
	conn, err := amqp.Dial(rmq.URL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{work, dlq} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.Close()
	// archived polls through an outage of the observer's own server.
	archived := func() (rows, distinct int) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := observer.QueryRow(ctx, "SELECT count(*), count(DISTINCT message_id) FROM expiryctl.dead_letters").Scan(&rows, &distinct)
			cancel()
			if err == nil {
				return rows, distinct
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	pub := startSteadyPublisher(t, rmq.URL, dlq)
	ingestCLI := newCLI(pg.Login(t, dbURL, "ingest", "expiryctl_ingester"), "")
	ingestCLI.env = append(ingestCLI.env, "EXPIRYCTL_AMQP_URL="+rmq.URL)
	ingest := ingestCLI.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--batch", "50")
	opsCLI := newCLI(pg.Login(t, dbURL, "ops", "expiryctl_operator"), "")
	opsCLI.env = append(opsCLI.env, "EXPIRYCTL_AMQP_URL="+rmq.URL, "EXPIRYCTL_MANAGEMENT_URL="+rmq.ManagementURL)
	serve := opsCLI.start(t, "metrics", "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--work-queue", work)
	var metricsURL string
	waitFor(t, 30*time.Second, "metrics serve to listen", func() bool {
		m := regexp.MustCompile(`serving metrics on (http://\S+/metrics)`).FindStringSubmatch(serve.stderr.String())
		if m != nil {
			metricsURL = m[1]
		}
		return m != nil
	})
	waitFor(t, 60*time.Second, "the first letters archived", func() bool { n, _ := archived(); return n >= 100 })

	// recovers says how long after a server came back letters were
	// archived again.
	recovers := func(what string) time.Duration {
		back := time.Now()
		before, _ := archived()
		waitFor(t, 90*time.Second, "letters archived again after "+what, func() bool { n, _ := archived(); return n > before+20 })
		return time.Since(back)
	}
	rmq.Restart(t, 2*time.Second)
	brokerRecovery := recovers("the RabbitMQ restart")
	pg.Restart(t, 2*time.Second)
	databaseRecovery := recovers("the PostgreSQL restart")
	t.Logf("archiving again %s after RabbitMQ's start_app, %s after PostgreSQL's start", brokerRecovery.Round(time.Millisecond), databaseRecovery.Round(time.Millisecond))

	if ingest.exited() {
		t.Fatalf("dlq ingest --follow exited: %s", ingest.res)
	}
	if serve.exited() {
		t.Fatalf("metrics serve exited: %s", serve.res)
	}
	// The exporter's readings recover: fresh, and counting letters
	// archived after both restarts.
	afterRestarts, _ := archived()
	waitFor(t, 30*time.Second, "a fresh metrics reading counting the letters archived since the restarts", func() bool {
		age, ingested, ok := scrape(metricsURL)
		return ok && age < 3 && ingested >= float64(afterRestarts)
	})

	pub.finish()
	confirmed, unknown := int(pub.confirmed.Load()), int(pub.unknown.Load())
	var rows, distinct int
	waitFor(t, 60*time.Second, "the queue drained into the archive", func() bool {
		rows, distinct = archived()
		return rows >= confirmed && queueReady(t, rmq.URL, dlq) == 0
	})
	time.Sleep(time.Second) // a batch in flight commits
	rows, distinct = archived()
	left := queueReady(t, rmq.URL, dlq)
	t.Logf("published %d confirmed (+%d unknown at the losses); archived %d rows, %d distinct; left %d", confirmed, unknown, rows, distinct, left)
	if rows != distinct {
		t.Errorf("%d rows for %d distinct letters: some letter was stored twice", rows, distinct)
	}
	if rows+left < confirmed || rows+left > confirmed+unknown {
		t.Errorf("archived %d + left %d, want the %d confirmed (up to %d more, published unconfirmed at a loss)", rows, left, confirmed, unknown)
	}

	ingest.signal(syscall.SIGINT)
	res := ingest.wait(30 * time.Second)
	for _, want := range []string{"lost RabbitMQ: ", "reconnected to RabbitMQ after ", "lost PostgreSQL: ", "PostgreSQL is back after "} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the ingest's stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	for _, line := range strings.Split(res.stderr, "\n") {
		if strings.Contains(line, "RabbitMQ") || strings.Contains(line, "PostgreSQL") {
			t.Logf("ingest: %s", line)
		}
	}
	serve.signal(syscall.SIGINT)
	served := serve.wait(30 * time.Second).stderr
	for _, line := range strings.Split(served, "\n") {
		if line != "" {
			t.Logf("metrics serve: %s", line)
		}
	}
	// The database was down for 2 s under a 1 s interval: some reading
	// failed, and the retry after it says when.
	for _, want := range []string{"warning: metrics reading failed (try 1)", ", reading again in ", "metrics reading recovered after "} {
		if !strings.Contains(served, want) {
			t.Errorf("metrics serve's stderr lacks %q:\n%s", want, served)
		}
	}
}

var metricLine = regexp.MustCompile(`(?m)^(expiryctl_metrics_snapshot_age_seconds|expiryctl_dead_letters_ingested_total)(\{[^}]*\})? (\S+)$`)

// scrape reads the snapshot's age and the archive's letters ingested.
func scrape(url string) (age, ingested float64, ok bool) {
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own exporter
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	seen := false
	for _, m := range metricLine.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		if m[1] == "expiryctl_metrics_snapshot_age_seconds" {
			age, seen = v, true
		} else {
			ingested += v
		}
	}
	return age, ingested, seen
}

var queueReadyMu sync.Mutex

// queueReady is the letters waiting in queue on the broker at url.
func queueReady(t testing.TB, url, queue string) int {
	t.Helper()
	queueReadyMu.Lock()
	defer queueReadyMu.Unlock()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}
