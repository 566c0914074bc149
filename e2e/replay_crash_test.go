package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestReplayRunCrashResume kills `replay run` with SIGKILL at random moments
// while it replays a 500-item cohort into the running reference worker, and
// runs it again after each kill. A killed runner leaves the request running
// and its lock free (PostgreSQL ends the session), so each new run resumes
// without a new approval. In the end no item was published more than
// replay.PublishBound times (a tap queue on the exchange sees every copy)
// nor more often than its sends count, nothing outside the cohort was
// published, and every item is confirmed (published at least once) or
// failed by rule publish-bound, its sends spent while a kill left it in
// doubt each time: few or none, since a run counts a send only just before
// it publishes. Each reservation whose job reached the queue transitioned
// exactly once: the duplicates a kill leaves are absorbed by the worker's
// idempotency key.
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
	// Through the exchange, so that the tap gets a copy of each publish.
	req := w.request(t, replay.NewRequest{Rate: 150, Canary: intRef(10), ViaExchange: true})
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
		// Exit 1 is a run that completed with failed items: those the
		// bound failed, checked below.
		if final.code != 0 && (final.code != 1 || !strings.Contains(final.stderr, "completed, but")) {
			t.Fatalf("run %d: %s", run, final)
		}
		break
	}
	var summary replaySummary
	decodeJSON(t, final, &summary)
	boundFailed := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'failed'
		AND sends = $2 AND last_error LIKE '%rule publish-bound%'`, req.ID, replay.PublishBound)
	if summary.Status != "completed" || summary.Confirmed+boundFailed != n || summary.Failed != boundFailed {
		t.Fatalf("final run: %+v with %d items failed by rule publish-bound, want completed with the other %d confirmed", summary, boundFailed, n-boundFailed)
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
	sends := itemSends(t, w.db.Pool, req.ID)
	maxCopies, reached := 0, 0
	unsent := map[string]bool{}
	for _, l := range w.letters {
		c, it := copies[l], sends[l]
		maxCopies = max(maxCopies, c)
		switch {
		case c > replay.PublishBound:
			t.Errorf("item %d was published %d times, more than the bound of %d", l, c, replay.PublishBound)
		case c > it.sends:
			t.Errorf("item %d was published %d times and counted %d sends: the count is no upper bound", l, c, it.sends)
		case c == 0 && it.state == "confirmed":
			t.Errorf("item %d is confirmed and was never published", l)
		case c == 0:
			unsent[it.reservation] = true
		}
		if c > 0 {
			reached++
		}
		delete(copies, l)
	}
	if len(copies) != 0 {
		t.Errorf("published items outside the cohort: %v", copies)
	}
	duplicates := total - reached
	w.assertTransitionedOnceBut(t, reached, unsent)
	if got := itemStates(t, w.db.Pool, req.ID); got["confirmed"]+boundFailed != n {
		t.Errorf("item states %v with %d failed by rule publish-bound, want the other %d confirmed", got, boundFailed, n-boundFailed)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM reservations.processed_jobs`); c != reached {
		t.Errorf("%d jobs processed, want each of the %d keys that reached the queue once", c, reached)
	}
	resumes := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.start' AND (details->>'resume')::bool`)
	republished := count(t, w.db.Pool, `SELECT coalesce(sum((details->>'republished')::int), 0) FROM expiryctl.audit_log WHERE action = 'replay.complete'`)
	t.Logf("replay crash test: %d kills, %d resumed runs, %d retries while the killed session's lock was still held; %d copies published for %d items (%d duplicates, %d republished by the final run, at most %d copies of one); %d failed by rule publish-bound (%d of them never reached the queue); after each kill: %s",
		kills, resumes, lockBusy, total, n, duplicates, republished, maxCopies, boundFailed, len(unsent), strings.Join(trail, "; "))
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

// itemSend is an item's state, its count of sends and its letter's
// reservation.
type itemSend struct {
	state, reservation string
	sends              int
}

// itemSends reads every item of a request, by letter.
func itemSends(t *testing.T, pool *pgxpool.Pool, request int64) map[int64]itemSend {
	t.Helper()
	rows, err := pool.Query(withTimeout(t), `SELECT i.dead_letter_id, i.state, i.sends, coalesce(d.reservation_id, '')
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id WHERE i.request_id = $1`, request)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]itemSend{}
	for rows.Next() {
		var id int64
		var it itemSend
		if err := rows.Scan(&id, &it.state, &it.sends, &it.reservation); err != nil {
			t.Fatal(err)
		}
		out[id] = it
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
