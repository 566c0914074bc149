package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestReplayRunCrashResume kills `replay run` with SIGKILL at random moments
// while it replays a 500-item cohort into the running reference worker, and
// runs it again after each kill. A killed runner leaves the request running
// and its lock free (PostgreSQL ends the session), so each new run resumes
// without a new approval. In the end every item must have been published at
// least once (a tap queue on the exchange sees every copy), nothing outside
// the cohort published, every item confirmed, and each reservation
// transitioned exactly once: the duplicates a kill leaves are absorbed by
// the worker's idempotency key.
func TestReplayRunCrashResume(t *testing.T) {
	t.Parallel()
	const (
		n        = 500
		minKills = 10
	)
	w := newReplayWorld(t, n, "canary_window=300ms")
	// The tap sees every copy the runner publishes, beside the worker's queue.
	tap := amqptest.Name(t, ".tap")
	amqptest.DeleteOnCleanup(t, []string{tap}, nil)
	ch, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(tap, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(tap, w.topo.RoutingKey, w.topo.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	req := w.request(t, replay.NewRequest{Rate: 150, Canary: intRef(10)})
	w.approve(t, req.ID)
	w.runWorker(t)
	id := strconv.FormatInt(req.ID, 10)

	rng := rand.New(rand.NewPCG(seed(t), 0))
	var (
		kills, lockBusy int
		trail           []string
		final           result
	)
	for run := 1; ; run++ {
		if run > 4*minKills {
			t.Fatalf("gave up after %d runs with %d kills: %s", run-1, kills, strings.Join(trail, ", "))
		}
		if kills >= minKills {
			final = w.cli.run(t, "replay", "run", id, "-o", "json")
		} else {
			delay := time.Duration(60+rng.IntN(340)) * time.Millisecond
			p := w.cli.start(t, "replay", "run", id, "-o", "json")
			time.Sleep(delay)
			if !p.exited() {
				p.signal(syscall.SIGKILL)
				if res := p.wait(10 * time.Second); res.code != -1 {
					t.Fatalf("run %d should have died of SIGKILL: %s", run, res)
				}
				kills++
				states := itemStates(t, w.db.Pool, req.ID)
				trail = append(trail, fmt.Sprintf("kill after %s: %d confirmed, %d publishing", delay, states["confirmed"], states["publishing"]))
				continue
			}
			final = p.wait(time.Second)
		}
		if final.code == 4 && strings.Contains(final.stderr, "single-runner") {
			// PostgreSQL has not noticed the killed session yet; its lock
			// goes with it in a moment.
			lockBusy++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if final.code != 0 {
			t.Fatalf("run %d: %s", run, final)
		}
		break
	}
	var summary replaySummary
	decodeJSON(t, final, &summary)
	if summary.Status != "completed" || summary.Confirmed != n {
		t.Fatalf("final run: %+v, want completed with all %d confirmed", summary, n)
	}
	if got := w.status(t, req.ID); got != "completed" {
		t.Fatalf("request is %s, want completed", got)
	}

	// Every copy that reached the exchange, from the tap.
	copies := map[int64]int{}
	total := 0
	tapCh, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer tapCh.Close()
	for {
		d, ok, err := tapCh.Get(tap, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		item, isInt := d.Headers[replay.HeaderReplayItem].(int64)
		if !isInt || d.Headers[replay.HeaderReplayRequest] != req.ID {
			t.Fatalf("a message on the exchange is not an item of request %d: headers %v", req.ID, d.Headers)
		}
		copies[item]++
		total++
	}
	for _, l := range w.letters {
		if copies[l] == 0 {
			t.Errorf("item %d was never published", l)
		}
		delete(copies, l)
	}
	if len(copies) != 0 {
		t.Errorf("published items outside the cohort: %v", copies)
	}
	duplicates := total - n
	w.assertTransitionedOnce(t, n)
	if got := itemStates(t, w.db.Pool, req.ID); got["confirmed"] != n {
		t.Errorf("item states %v, want all %d confirmed", got, n)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM reservations.processed_jobs`); c != n {
		t.Errorf("%d jobs processed, want each of the %d keys once", c, n)
	}
	resumes := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.start' AND (details->>'resume')::bool`)
	republished := count(t, w.db.Pool, `SELECT coalesce(sum((details->>'republished')::int), 0) FROM expiryctl.audit_log WHERE action = 'replay.complete'`)
	t.Logf("replay crash test: %d kills, %d resumed runs, %d retries while the killed session's lock was still held; %d copies published for %d items (%d duplicates, %d republished by the final run); after each kill: %s",
		kills, resumes, lockBusy, total, n, duplicates, republished, strings.Join(trail, "; "))
	// The approval was spent once; every later run resumed.
	if starts := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.start' AND NOT (details->>'resume')::bool`); starts != 1 {
		t.Errorf("%d runs started the request afresh, want 1", starts)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'in_request'`); c != 0 {
		t.Errorf("%d letters are still held by the request after it completed", c)
	}
	// However often the runner was killed, every state it left has an event
	// behind it.
	if r := w.cli.run(t, "audit", "verify", "--reconcile"); r.code != 0 || !strings.Contains(r.stdout, "every state has an event behind it") {
		t.Errorf("the trail does not reconcile after the kills: %s", r)
	}
}

// status reads a request's status.
func (w *replayWorld) status(t *testing.T, id int64) string {
	t.Helper()
	var s string
	if err := w.db.Pool.QueryRow(withTimeout(t), `SELECT status FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
