package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// seed returns the seed for a test's random choices: EXPIRYCTL_E2E_SEED to
// replay a failed run, otherwise a fresh one. It is logged either way.
func seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("EXPIRYCTL_E2E_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EXPIRYCTL_E2E_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from EXPIRYCTL_E2E_SEED)", n)
		return n
	}
	n := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with EXPIRYCTL_E2E_SEED=%d)", n, n)
	return n
}

// TestIngestCrashSafety kills `dlq ingest` with SIGKILL again and again while
// it drains a large DLQ, and republishes copies of letters between kills.
// Whatever a kill interrupts — connecting, collecting, inserting, between
// commit and ack — every letter must end up archived exactly once and the
// queue empty.
func TestIngestCrashSafety(t *testing.T) {
	t.Parallel()
	const (
		letters  = 5000
		minKills = 10
		batch    = "100"
	)
	db := pgtest.New(t)
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	c := newCLI(db.URL, "e2e-crash")
	msgs := workerLetters(0, letters, "db_timeout", "dial tcp 10.0.0.5:5432: i/o timeout")
	r.publish(t, dlq, msgs...)

	rng := rand.New(rand.NewPCG(seed(t), 0))
	var (
		kills, interrupted, duplicates int
		trail                          []string
	)
	for run := 1; kills < minKills; run++ {
		if run > 3*minKills {
			t.Fatalf("only %d of %d runs could be killed: the runs end too fast for the kill delays", kills, run-1)
		}
		args := []string{"dlq", "ingest", "--queue", dlq, "--batch", batch}
		if run%2 == 1 {
			args = append(args, "--follow")
		}
		before := rows(t, db.Pool)
		delay := time.Duration(20+rng.IntN(381)) * time.Millisecond
		p := c.start(t, args...)
		time.Sleep(delay)
		if p.exited() {
			// Without --follow a run may drain the queue before its kill.
			if res := p.wait(time.Second); res.code != 0 {
				t.Fatalf("run %d: %s", run, res)
			}
			trail = append(trail, fmt.Sprintf("run %d ended before its kill", run))
			continue
		}
		p.signal(syscall.SIGKILL)
		res := p.wait(10 * time.Second)
		if res.code == 0 && run%2 == 0 {
			// It drained the queue and exited between the look above and
			// the signal.
			trail = append(trail, fmt.Sprintf("run %d ended before its kill", run))
			continue
		}
		if res.code != -1 {
			t.Fatalf("run %d should have died of SIGKILL: %s", run, res)
		}
		kills++
		left := r.settled(t, dlq)
		after := rows(t, db.Pool)
		// Storing letters and leaving others behind means the kill landed
		// in the middle of the capture, not before or after it.
		if after > before && left > 0 {
			interrupted++
		}
		trail = append(trail, fmt.Sprintf("%d (+%d after %s, %d queued)", after, after-before, delay, left))

		// Exact copies, as a worker crash or a redelivery makes them: the
		// originals may be archived already or still queued.
		copies := make([]amqp.Publishing, 100+rng.IntN(201))
		for i := range copies {
			copies[i] = msgs[rng.IntN(letters)]
		}
		r.publish(t, dlq, copies...)
		duplicates += len(copies)
	}

	final := c.ok(t, "dlq", "ingest", "--queue", dlq, "--batch", batch)
	if left := r.settled(t, dlq); left != 0 {
		t.Errorf("%d letters left in the queue after the final ingest, want 0", left)
	}
	if n := rows(t, db.Pool); n != letters {
		t.Errorf("%d rows archived, want %d: each letter exactly once", n, letters)
	}
	if n := count(t, db.Pool, "SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters"); n != letters {
		t.Errorf("%d distinct message ids archived, want %d", n, letters)
	}
	want := make(map[string]bool, letters)
	for _, m := range msgs {
		want[m.MessageId] = true
	}
	ids, err := db.Pool.Query(withTimeout(t), "SELECT message_id FROM expiryctl.dead_letters")
	if err != nil {
		t.Fatal(err)
	}
	for ids.Next() {
		var id string
		if err := ids.Scan(&id); err != nil {
			t.Fatal(err)
		}
		delete(want, id)
	}
	if err := ids.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 0 {
		t.Errorf("%d published letters are missing from the archive", len(want))
	}

	// Every batch that committed left an audit row in its transaction, so
	// the duplicates they counted beyond the copies published are letters
	// that a kill caught after their commit and before their ack.
	batchDuplicates := count(t, db.Pool, `SELECT coalesce(sum((details->>'duplicates')::int), 0)
		FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`)
	finalLine := regexp.MustCompile(`ingested .*`).FindString(final.stderr)
	t.Logf("crash test: %d kills (%d interrupted mid-capture), %d exact copies published, %d letters redelivered after their commit; rows after each kill: %s; final run: %s",
		kills, interrupted, duplicates, batchDuplicates-duplicates, strings.Join(trail, ", "), finalLine)
	if batchDuplicates < duplicates {
		t.Errorf("the batch audit rows count %d duplicates, fewer than the %d copies published", batchDuplicates, duplicates)
	}
	// The kills leave the trail whole and the governance tables matching it.
	if r := c.run(t, "audit", "verify", "--reconcile"); r.code != 0 || !strings.Contains(r.stdout, "every state has an event behind it") {
		t.Errorf("after the kills the trail does not verify and reconcile: %s", r)
	}
}
