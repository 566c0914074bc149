package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// transitions counts the capacity a reservation released: one per expiry
// that happened, whatever the deliveries.
func transitions(t *testing.T, b *testBundle, id string) int {
	t.Helper()
	return countRows(t, b.pool, `SELECT count(*) FROM reservations.capacity_releases WHERE reservation_id = $1`, id)
}

// liveConfig is fastConfig on the real clock, for jobs that wait for time
// to pass.
func liveConfig() worker.Config {
	cfg := fastConfig(testNow)
	cfg.Now = time.Now
	return cfg
}

func actionsOf(events []worker.Event) map[worker.Action]int {
	n := map[worker.Action]int{}
	for _, e := range events {
		n[e.Action]++
	}
	return n
}

// TestExpireOnceWaitsForTheDeadline: a hold whose deadline is still ahead,
// by the reservation database's clock, is not expired, and nothing is
// recorded against the job's key.
func TestExpireOnceWaitsForTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-early", version: 3, dueIn: time.Hour})
	_, err := worker.ExpireOnce(context.Background(), b.pool, jobFor("r-early", 3))
	var notDue *worker.NotDueError
	if !errors.As(err, &notDue) || notDue.Wait < 59*time.Minute || notDue.Wait > time.Hour {
		t.Fatalf("ExpireOnce on a hold an hour from its deadline = %v, want not due for about an hour", err)
	}
	if status, version := readReservation(t, b.pool, "r-early"); status != "held" || version != 3 {
		t.Errorf("the hold is %s v%d, want held v3", status, version)
	}
	if n := countRows(t, b.pool, `SELECT count(*) FROM reservations.processed_jobs`); n != 0 {
		t.Errorf("%d keys recorded for a job that did not run", n)
	}
}

// TestRunDefersAnEarlyJobUntilItIsDue: a job delivered before its hold runs
// out, or before its not_before, goes back to wait, spending no attempt,
// and expires the hold once it is due.
func TestRunDefersAnEarlyJobUntilItIsDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-soon", version: 3, dueIn: 1500 * time.Millisecond})
	seedReservation(t, b.pool, reservation{id: "r-later", version: 3})
	rec := b.run(t, liveConfig(), nil)

	b.publish(t, "expire-r-soon-v3", jobBody(t, jobFor("r-soon", 3)))
	later, err := json.Marshal(map[string]any{"reservation_id": "r-later", "expected_version": 3, "hold_until": "2026-11-30T12:20:00Z",
		"idempotency_key": "expire:r-later:v3", "not_before": time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, "expire-r-later-v3", later)
	events := rec.waitTerminal(t, 2)
	for _, id := range []string{"r-soon", "r-later"} {
		var deferred, acked int
		for _, e := range events {
			switch {
			case e.ReservationID != id:
			case e.Action == worker.ActionDeferred:
				deferred++
			case e.Action == worker.ActionAcked && e.Outcome == worker.Expired && e.Attempt == 1:
				acked++
			}
		}
		if deferred == 0 || acked != 1 || transitions(t, b, id) != 1 {
			t.Errorf("%s: deferred %d times, expired %d times at attempt 1, %d transitions; want deferred, then one expiry",
				id, deferred, acked, transitions(t, b, id))
		}
	}
	if status, _ := readReservation(t, b.pool, "r-soon"); status != "expired" {
		t.Errorf("r-soon is %s once due, want expired", status)
	}
}

// TestRunRespectsRetryAfter: a failure that says when to come back is
// retried no sooner, and a letter dead-lettered with it carries
// x-retry-after for the replay.
func TestRunRespectsRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedReservation(t, b.pool, reservation{id: "r-429", version: 3})
	seedReservation(t, b.pool, reservation{id: "r-429-for-good", version: 3})
	var calls atomic.Int64
	throttled := func(ctx context.Context, job worker.Job) (worker.Outcome, error) {
		if job.ReservationID == "r-429-for-good" || calls.Add(1) == 1 {
			return "", &worker.JobError{Class: worker.ClassThrottled, Err: errors.New("429 Too Many Requests"), RetryAfter: 150 * time.Millisecond}
		}
		return worker.ExpireOnce(ctx, b.pool, job)
	}
	cfg := fastConfig(testNow)
	cfg.Backoff = worker.Backoff{Base: 20 * time.Millisecond, Max: 20 * time.Millisecond, Jitter: worker.NoJitter}
	cfg.MaxAttempts = 2
	rec := b.run(t, cfg, throttled)
	b.publish(t, "expire-r-429-v3", jobBody(t, jobFor("r-429", 3)))
	b.publish(t, "expire-r-429-for-good-v3", jobBody(t, jobFor("r-429-for-good", 3)))
	events := rec.waitTerminal(t, 2)
	for _, e := range events {
		if e.Action == worker.ActionRetried && e.Delay < 150*time.Millisecond {
			t.Errorf("retried %s after %s, before the 150ms it was asked to wait", e.ReservationID, e.Delay)
		}
	}
	d := b.getN(t, b.topo.DeadLetterQueue, 1)[0]
	if got := d.Headers[worker.HeaderRetryAfter]; got != int64(1) {
		// 150 ms, in whole seconds rounded up: no sooner than asked.
		t.Errorf("x-retry-after = %#v, want 1 (seconds)", got)
	}
	if transitions(t, b, "r-429") != 1 {
		t.Errorf("r-429: %d transitions, want 1", transitions(t, b, "r-429"))
	}
}

// TestDrillsLeaveOneTransition runs the seed articles' drills against the
// real worker, queue and database: a crash after the commit and before the
// ack, a duplicate delivery, a renewal just before the expiry, and a
// dead-letter redrive. Each leaves exactly one transition.
func TestDrillsLeaveOneTransition(t *testing.T) {
	t.Parallel()

	t.Run("crash after the commit, before the ack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seedReservation(t, b.pool, reservation{id: "r-crash", version: 3})
		var calls atomic.Int64
		// The first delivery commits, then its ack never comes: the broker
		// delivers again, as after a crash.
		crashing := func(ctx context.Context, job worker.Job) (worker.Outcome, error) {
			outcome, err := worker.ExpireOnce(ctx, b.pool, job)
			if calls.Add(1) == 1 {
				return "", &worker.JobError{Class: worker.ClassDBTimeout, Err: errors.New("connection lost after commit")}
			}
			return outcome, err
		}
		rec := b.run(t, fastConfig(testNow), crashing)
		b.publish(t, "expire-r-crash-v3", jobBody(t, jobFor("r-crash", 3)))
		events := rec.waitTerminal(t, 1)
		if last := events[len(events)-1]; last.Outcome != worker.Duplicate || transitions(t, b, "r-crash") != 1 {
			t.Errorf("redelivered after the commit: %+v, %d transitions; want a duplicate and one transition", last, transitions(t, b, "r-crash"))
		}
	})

	t.Run("duplicate delivery", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seedReservation(t, b.pool, reservation{id: "r-twice", version: 3})
		rec := b.run(t, fastConfig(testNow), nil)
		body := jobBody(t, jobFor("r-twice", 3))
		b.publish(t, "expire-r-twice-v3", body)
		b.publish(t, "expire-r-twice-v3", body)
		events := rec.waitTerminal(t, 2)
		outcomes := map[worker.Outcome]int{}
		for _, e := range events {
			outcomes[e.Outcome]++
		}
		if outcomes[worker.Expired] != 1 || outcomes[worker.Duplicate] != 1 || transitions(t, b, "r-twice") != 1 {
			t.Errorf("two deliveries: %v, %d transitions; want one expiry, one duplicate, one transition", outcomes, transitions(t, b, "r-twice"))
		}
	})

	t.Run("renewal just before the expiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seedReservation(t, b.pool, reservation{id: "r-renewed", version: 1})
		// The customer renews the hold as its expiry job is on its way: a
		// new version, a new deadline, a new job.
		if _, err := b.pool.Exec(context.Background(), `UPDATE reservations.reservations SET version = 2,
			hold_until = now() + interval '1 second' WHERE id = 'r-renewed'`); err != nil {
			t.Fatal(err)
		}
		rec := b.run(t, liveConfig(), nil)
		b.publish(t, "expire-r-renewed-v1", jobBody(t, jobFor("r-renewed", 1)))
		b.publish(t, "expire-r-renewed-v2", jobBody(t, jobFor("r-renewed", 2)))
		events := rec.waitTerminal(t, 2)
		n := actionsOf(events)
		if n[worker.ActionDeadLettered] != 1 || n[worker.ActionDeferred] == 0 || transitions(t, b, "r-renewed") != 1 {
			t.Errorf("a renewed hold: %v, %d transitions; want the old job dead-lettered (version conflict), the new one deferred, one transition",
				n, transitions(t, b, "r-renewed"))
		}
		if status, version := readReservation(t, b.pool, "r-renewed"); status != "expired" || version != 3 {
			t.Errorf("the renewed hold is %s v%d, want expired v3 at its new deadline", status, version)
		}
	})

	t.Run("dead-letter redrive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seedReservation(t, b.pool, reservation{id: "r-redriven", version: 3})
		var down atomic.Bool
		down.Store(true)
		sick := func(ctx context.Context, job worker.Job) (worker.Outcome, error) {
			if down.Load() {
				return "", &worker.JobError{Class: worker.ClassDBTimeout, Err: errors.New("the database is down")}
			}
			return worker.ExpireOnce(ctx, b.pool, job)
		}
		cfg := fastConfig(testNow)
		cfg.MaxAttempts = 2
		rec := b.run(t, cfg, sick)
		b.publish(t, "expire-r-redriven-v3", jobBody(t, jobFor("r-redriven", 3)))
		rec.waitTerminal(t, 1)
		letter := b.getN(t, b.topo.DeadLetterQueue, 1)[0]
		down.Store(false)
		// Redriven twice, as a hurried operator might.
		b.publish(t, letter.MessageId, letter.Body)
		b.publish(t, letter.MessageId, letter.Body)
		events := rec.waitTerminal(t, 3)
		outcomes := map[worker.Outcome]int{}
		for _, e := range events {
			outcomes[e.Outcome]++
		}
		if outcomes[worker.Expired] != 1 || outcomes[worker.Duplicate] != 1 || transitions(t, b, "r-redriven") != 1 {
			t.Errorf("redriven twice: %v, %d transitions; want one expiry, one duplicate, one transition", outcomes, transitions(t, b, "r-redriven"))
		}
	})
}
