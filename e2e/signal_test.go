package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// publisher keeps publishing distinct worker letters to a queue until
// stopped, so that a signal reaches `dlq ingest --follow` while letters are
// still arriving: with a batch being written and another being collected.
type publisher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	confirmed int
	err       error
}

// startPublisher publishes on a connection of its own: a confirm channel
// serves one publishing goroutine.
func startPublisher(t testing.TB, queue string) *publisher {
	t.Helper()
	ch, err := amqptest.Dial(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{cancel: cancel, done: make(chan struct{})}
	go p.loop(ctx, ch, queue)
	// The test reads what stop returns; this only ends the goroutine of a
	// test that failed first.
	t.Cleanup(func() { _, _ = p.stop() })
	return p
}

func (p *publisher) loop(ctx context.Context, ch *amqp.Channel, queue string) {
	defer close(p.done)
	const chunk = 50
	for next := 0; ctx.Err() == nil; next += chunk {
		var pending []*amqp.DeferredConfirmation
		for _, m := range workerLetters(next, chunk, "throttled", "429 Too Many Requests") {
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, m)
			if err != nil {
				p.fail(err)
				return
			}
			pending = append(pending, dc)
		}
		// A chunk counts once the broker confirmed all of it; waiting
		// without ctx means a stop never leaves a chunk half counted.
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for _, dc := range pending {
			if ok, err := dc.WaitContext(wait); err != nil || !ok {
				cancel()
				p.fail(fmt.Errorf("publish not confirmed (ok=%v): %w", ok, err))
				return
			}
		}
		cancel()
		p.mu.Lock()
		p.confirmed += chunk
		p.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *publisher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// stop ends publishing and returns how many letters the broker confirmed.
func (p *publisher) stop() (int, error) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confirmed, p.err
}

// TestIngestSignalCommitsOrNothing interrupts `dlq ingest --follow` the ways
// an operator does. It must finish the batch it is writing, leave the rest
// in the queue, and exit 0: no letter lost, none both stored and queued.
func TestIngestSignalCommitsOrNothing(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			r := newRabbit(t)
			dlq := r.queue(t, ".dlq", nil)
			c := newCLI(db.URL, "e2e-signal")

			pub := startPublisher(t, dlq)
			p := c.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--batch", "50")
			waitFor(t, 30*time.Second, "ingest to store 300 letters", func() bool {
				return rows(t, db.Pool) >= 300 || p.exited()
			})
			p.signal(sig)
			res := p.wait(30 * time.Second)
			published, err := pub.stop()
			if err != nil {
				t.Fatalf("publisher: %v", err)
			}
			if res.code != 0 {
				t.Fatalf("an interrupted ingest should exit 0 after finishing its batch: %s", res)
			}
			if !strings.Contains(res.stderr, "capturing "+dlq+" until interrupted") || !strings.Contains(res.stderr, "interrupted: ingested ") {
				t.Errorf("an interrupted ingest should say at once what it does, and sum up what it did: %s", res)
			}

			queued := r.settled(t, dlq)
			stored := rows(t, db.Pool)
			if stored+queued != published {
				t.Errorf("%d stored + %d still queued = %d, want the %d published: a letter was lost or is both stored and queued",
					stored, queued, stored+queued, published)
			}
			if n := count(t, db.Pool, "SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters"); n != stored {
				t.Errorf("%d rows but %d distinct message ids: a letter was stored twice", stored, n)
			}
			// The batch finished after the signal commits with its audit row, so
			// the trail accounts for every stored letter too.
			audited := count(t, db.Pool, `SELECT coalesce(sum((details->>'stored')::int), 0)
				FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`)
			if audited != stored {
				t.Errorf("batch audit rows account for %d stored letters, the archive holds %d", audited, stored)
			}
			t.Logf("%v: %d published, %d stored, %d left queued", sig, published, stored, queued)
		})
	}
}

// TestReplayRunInterruptedSaysItResumes presses Ctrl-C on `replay run`
// mid-way, as an on-call engineer does. The request is not cancelled: the
// words must say it still runs, that nothing was lost and how to resume
// it, `replay list` must show that no runner holds it, and the command
// named must finish the job.
func TestReplayRunInterruptedSaysItResumes(t *testing.T) {
	t.Parallel()
	const n = 40
	w := newReplayWorld(t, n, "canary_window=300ms")
	req := w.request(t, replay.NewRequest{Rate: 20, Canary: intRef(2)})
	w.approve(t, req.ID)
	w.runWorker(t)
	id := strconv.FormatInt(req.ID, 10)

	p := w.cli.start(t, "replay", "run", id)
	waitFor(t, 60*time.Second, "the run to confirm 10 items", func() bool {
		return itemStates(t, w.db.Pool, req.ID)["confirmed"] >= 10 || p.exited()
	})
	p.signal(syscall.SIGINT)
	res := p.wait(30 * time.Second)
	if res.code != 130 {
		t.Fatalf("an interrupted run should exit 130 (docs/exit-codes.md): %s", res)
	}
	for _, want := range []string{"interrupted: replay request " + id + " is still running", "Nothing was lost",
		"Resume it with `expiryctl replay run " + id + "`"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr should say %q: %s", want, res)
		}
	}
	if strings.Contains(res.stderr, "cancelled") {
		t.Errorf("an interrupted run is not cancelled, and must not say so: %s", res)
	}
	if got := w.status(t, req.ID); got != "running" {
		t.Fatalf("request is %s after Ctrl-C, want running", got)
	}

	list := w.cli.ok(t, "replay", "list", "-o", "json")
	if !strings.Contains(list.stdout, `"runner_held": false`) {
		t.Errorf("replay list -o json should say runner_held false: %s", list)
	}
	if table := w.cli.ok(t, "replay", "list"); !strings.Contains(table.stderr, "replay request "+id+" is running, but no runner holds it") {
		t.Errorf("replay list should say no runner holds request %s: %s", id, table)
	}

	again := w.cli.ok(t, "replay", "run", id, "-o", "json")
	var summary replaySummary
	decodeJSON(t, again, &summary)
	if summary.Status != "completed" {
		t.Fatalf("resumed run: %+v, want completed", summary)
	}
}
