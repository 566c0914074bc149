package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// newRiverDB is a database of the test's own with River's schema, apart
// from the reservations', as River's jobs are in production.
func newRiverDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := pgtest.NewEmpty(t)
	migrator, err := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("River's migrations: %v", err)
	}
	return db.Pool
}

// TestRunRiverExpiresEachJobOnce works a River queue as `expiryctl worker
// --river-queue` does: due jobs expire their reservation and complete, a
// duplicate completes without a second expiry, an early job is snoozed
// until its deadline and then expires, and a job no retry can help (a
// version conflict, a body that is not a job) is cancelled. An interrupt
// is a clean stop.
func TestRunRiverExpiresEachJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	if err := worker.EnsureSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	riverPool := newRiverDB(t)
	const queue = "expiry"

	seedReservation(t, db.Pool, reservation{id: "r-ok", version: 2})
	seedReservation(t, db.Pool, reservation{id: "r-dup", version: 1})
	seedReservation(t, db.Pool, reservation{id: "r-conflict", version: 5})
	seedReservation(t, db.Pool, reservation{id: "r-early", version: 1, dueIn: 1500 * time.Millisecond})
	bodies := map[string][]byte{
		"ok":        jobBody(t, jobFor("r-ok", 2)),
		"dup-1":     jobBody(t, jobFor("r-dup", 1)),
		"dup-2":     jobBody(t, jobFor("r-dup", 1)),
		"conflict":  jobBody(t, jobFor("r-conflict", 1)),
		"early":     jobBody(t, jobFor("r-early", 1)),
		"malformed": []byte(`["not", "a", "job"]`),
	}
	inserter, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for name, body := range bodies {
		res, err := inserter.Insert(ctx, worker.RiverArgs{Body: body}, &river.InsertOpts{Queue: queue})
		if err != nil {
			t.Fatalf("insert %s: %v", name, err)
		}
		ids[name] = res.Job.ID
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out syncWriter
	done := make(chan error, 1)
	go func() {
		done <- worker.RunRiver(runCtx, worker.RiverDeps{Pool: db.Pool, River: riverPool, Queue: queue, Concurrency: 2, Out: &out})
	}()

	want := map[string]string{"ok": "completed", "dup-1": "completed", "dup-2": "completed", "early": "completed",
		"conflict": "cancelled", "malformed": "cancelled"}
	state := func(name string) string {
		var s string
		if err := riverPool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, ids[name]).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitJobsSettle(t, want, state, &out)

	expired, releases := expiredAndReleased(t, db.Pool)
	if expired != 3 || releases != 3 {
		t.Errorf("%d reservations expired and %d releases, want 3 and 3 (ok, dup once, early)", expired, releases)
	}
	for _, line := range []string{"expired r-ok", "duplicate r-dup", "snoozed r-early", "cancelled r-conflict", "cancelled River job"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the worker's lines lack %q:\n%s", line, out.String())
		}
	}

	stop()
	wantCleanStop(t, done)
}

func TestValidRiverQueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		queue string
		ok    bool
	}{
		{"reservation-expiry", true},
		{"expiryctl-demo-reservation-expiry", true},
		{"expiry_2", true},
		{"expiryctl-demo.reservation-expiry", false},
		{"Expiry", false},
		{"expiry--queue", false},
		{"", false},
		{strings.Repeat("q", 129), false},
	} {
		if err := worker.ValidRiverQueue(tc.queue); (err == nil) != tc.ok {
			t.Errorf("ValidRiverQueue(%q) = %v, want ok %v", tc.queue, err, tc.ok)
		}
	}
}

// syncWriter is a buffer the worker writes from River's goroutines while
// the test reads it.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitJobsSettle waits up to 30 s for each named job's state (as stateOf
// reads it) to be the one want gives, and fails with every job's state
// and the worker's lines when they do not.
func waitJobsSettle(t *testing.T, want map[string]string, stateOf func(string) string, out fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		settled := true
		for name, s := range want {
			settled = settled && stateOf(name) == s
		}
		if settled {
			return
		}
		if time.Now().After(deadline) {
			for name := range want {
				t.Errorf("job %s: %s, want %s", name, stateOf(name), want[name])
			}
			t.Fatalf("the jobs did not settle:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expiredAndReleased counts the reservations the worker expired and the
// capacity it released.
func expiredAndReleased(t *testing.T, pool *pgxpool.Pool) (expired, releases int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM reservations.reservations WHERE status = 'expired'),
			(SELECT count(*) FROM reservations.capacity_releases)`).Scan(&expired, &releases); err != nil {
		t.Fatal(err)
	}
	return expired, releases
}

// wantCleanStop wants the interrupted worker's Run to return nil within
// 30 s.
func wantCleanStop(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("an interrupted worker returned %v, want a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop when interrupted")
	}
}
