package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// TestRunJobTableExpiresEachJobOnce polls a team's jobs table, in a
// database of its own, as `expiryctl worker --job-table` does: due jobs
// expire their reservation and are done, a duplicate is done without a
// second expiry, an early job is made due at its deadline and then
// expires, a job no retry can help (a version conflict, a payload that is
// not a job) is failed at once, and a replayed job that kept its spent
// attempts runs all the same. An interrupt is a clean stop.
func TestRunJobTableExpiresEachJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	if err := worker.EnsureSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	jobs := pgtest.NewEmpty(t)
	if _, err := jobs.Pool.Exec(ctx, `CREATE SCHEMA team; CREATE TABLE team.expiry_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
		status text NOT NULL DEFAULT 'pending', attempt_count int NOT NULL DEFAULT 0, last_error text,
		run_at timestamptz NOT NULL DEFAULT now(), failed_at timestamptz)`); err != nil {
		t.Fatal(err)
	}

	seedReservation(t, db.Pool, reservation{id: "r-ok", version: 2})
	seedReservation(t, db.Pool, reservation{id: "r-dup", version: 1})
	seedReservation(t, db.Pool, reservation{id: "r-conflict", version: 5})
	seedReservation(t, db.Pool, reservation{id: "r-early", version: 1, dueIn: 1500 * time.Millisecond})
	seedReservation(t, db.Pool, reservation{id: "r-replayed", version: 1})
	rows := []struct {
		name     string
		body     []byte
		attempts int
	}{
		{"ok", jobBody(t, jobFor("r-ok", 2)), 0},
		{"dup-1", jobBody(t, jobFor("r-dup", 1)), 0},
		{"dup-2", jobBody(t, jobFor("r-dup", 1)), 0},
		{"conflict", jobBody(t, jobFor("r-conflict", 1)), 0},
		{"early", jobBody(t, jobFor("r-early", 1)), 0},
		{"malformed", []byte(`["not", "a", "job"]`), 0},
		{"replayed", jobBody(t, jobFor("r-replayed", 1)), 2},
	}
	ids := map[string]int64{}
	for _, r := range rows {
		var id int64
		if err := jobs.Pool.QueryRow(ctx, `INSERT INTO team.expiry_jobs (payload, attempt_count) VALUES ($1, $2) RETURNING id`,
			string(r.body), r.attempts).Scan(&id); err != nil {
			t.Fatalf("insert %s: %v", r.name, err)
		}
		ids[r.name] = id
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out syncWriter
	done := make(chan error, 1)
	go func() {
		done <- worker.RunJobTable(runCtx, worker.JobTableDeps{Pool: db.Pool, Jobs: jobs.Pool, Table: "team.expiry_jobs",
			MaxAttempts: 2, Concurrency: 2, Out: &out})
	}()

	want := map[string]string{"ok": "done", "dup-1": "done", "dup-2": "done", "early": "done", "replayed": "done",
		"conflict": "failed", "malformed": "failed"}
	status := func(name string) string {
		var s string
		if err := jobs.Pool.QueryRow(ctx, `SELECT status FROM team.expiry_jobs WHERE id = $1`, ids[name]).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitJobsSettle(t, want, status, &out)

	expired, releases := expiredAndReleased(t, db.Pool)
	if expired != 4 || releases != 4 {
		t.Errorf("%d reservations expired and %d releases, want 4 and 4 (ok, dup once, early, replayed)", expired, releases)
	}
	var failedAt, lastError int
	if err := jobs.Pool.QueryRow(ctx, `SELECT count(failed_at), count(last_error) FROM team.expiry_jobs WHERE status = 'failed'`).
		Scan(&failedAt, &lastError); err != nil || failedAt != 2 || lastError != 2 {
		t.Errorf("failed rows: %d with failed_at, %d with last_error (%v); want both on both", failedAt, lastError, err)
	}
	for _, line := range []string{"expired r-ok", "duplicate r-dup", "put back r-early", "failed r-conflict", "expired r-replayed"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the poller's lines lack %q:\n%s", line, out.String())
		}
	}

	stop()
	wantCleanStop(t, done)
}
