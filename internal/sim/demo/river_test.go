package demo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// discardedJob is what the test reads of a river_job row.
type discardedJob struct {
	state       string
	attempt     int
	args        []byte
	errorsCount int
	lastError   string
}

func readRiverJob(t *testing.T, pool *pgxpool.Pool, id int64) discardedJob {
	t.Helper()
	var j discardedJob
	if err := pool.QueryRow(context.Background(), `SELECT state::text, attempt, args::text::bytea, coalesce(array_length(errors, 1), 0),
			coalesce(errors[array_length(errors, 1)]->>'error', '') FROM river_job WHERE id = $1`, id).
		Scan(&j.state, &j.attempt, &j.args, &j.errorsCount, &j.lastError); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestRunRiverStagesTheIncident stages the River incident in an empty
// database: River's migrations, contract jobs for due reservations, and a
// worker that deadlocks until River discards every job. A second run on
// the idle queue stages a second incident; a queue with a job River still
// means to work is refused.
func TestRunRiverStagesTheIncident(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	riverDB := pgtest.NewEmpty(t)
	const queue = "demo-reservation-expiry"

	res, err := demo.RunRiver(ctx, demo.RiverDeps{River: riverDB.Pool, Pool: db.Pool, Queue: queue, RunID: "run1"})
	if err != nil {
		t.Fatalf("RunRiver: %v", err)
	}
	if len(res.Jobs) != 4 || res.Attempts != 2 {
		t.Fatalf("staged %d jobs with %d attempts, want 4 with 2", len(res.Jobs), res.Attempts)
	}
	for _, id := range res.Jobs {
		j := readRiverJob(t, riverDB.Pool, id)
		if j.state != "discarded" || j.attempt != 2 || j.errorsCount != 2 || !strings.Contains(j.lastError, "deadlock detected") {
			t.Errorf("River job %d: %s after %d attempts, %d errors, last %q; want discarded after 2 deadlocks", id, j.state, j.attempt, j.errorsCount, j.lastError)
		}
		job, err := worker.DecodeJob(j.args)
		if err != nil {
			t.Errorf("River job %d: args %s are not a contract job: %v", id, j.args, err)
			continue
		}
		if !strings.Contains(job.ReservationID, "run1-river") || job.ExpectedVersion != 4 || job.IdempotencyKey == "" {
			t.Errorf("River job %d: %+v", id, job)
		}
		// Its reservation waits, held at the job's version and due, for
		// the replayed job to expire it.
		var status string
		var version int64
		var due bool
		if err := db.Pool.QueryRow(ctx, `SELECT status, version, hold_until < now() FROM reservations.reservations WHERE id = $1`,
			job.ReservationID).Scan(&status, &version, &due); err != nil {
			t.Fatalf("the reservation of River job %d: %v", id, err)
		}
		if status != "held" || version != job.ExpectedVersion || !due {
			t.Errorf("reservation %s: %s at version %d, due %v; want held at %d and due", job.ReservationID, status, version, due, job.ExpectedVersion)
		}
	}

	again, err := demo.RunRiver(ctx, demo.RiverDeps{River: riverDB.Pool, Pool: db.Pool, Queue: queue, RunID: "run2"})
	if err != nil || len(again.Jobs) != 4 {
		t.Fatalf("a second RunRiver: %d jobs, %v; want 4 more", len(again.Jobs), err)
	}

	inserter, err := river.NewClient(riverpgxv5.New(riverDB.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(ctx, worker.RiverArgs{Body: json.RawMessage(`{}`)}, &river.InsertOpts{Queue: queue}); err != nil {
		t.Fatal(err)
	}
	_, err = demo.RunRiver(ctx, demo.RiverDeps{River: riverDB.Pool, Pool: db.Pool, Queue: queue, RunID: "run3"})
	if err == nil || !strings.Contains(err.Error(), "1 jobs River still means to work") {
		t.Fatalf("RunRiver beside a live job = %v, want a refusal naming it", err)
	}
	if _, err := demo.RunRiver(ctx, demo.RiverDeps{River: riverDB.Pool, Pool: db.Pool, Queue: "demo.reservation-expiry", RunID: "run4"}); err == nil {
		t.Fatal("RunRiver on a queue name River refuses: no error")
	}
}

// TestEnsureRiverDatabase creates River's database for a login that may,
// finds one that exists, and tells a login without CREATEDB who can.
func TestEnsureRiverDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	name := db.Name + "_river"
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})

	login := db.Login(t, "alice", "expiryctl_operator")
	err := demo.EnsureRiverDatabase(ctx, login.Pool, name)
	if err == nil || !strings.Contains(err.Error(), "may not create it") || !strings.Contains(err.Error(), "CREATE DATABASE "+name) {
		t.Fatalf("EnsureRiverDatabase as a login without CREATEDB = %v, want who can create it", err)
	}

	for range 2 {
		if err := demo.EnsureRiverDatabase(ctx, db.Pool, name); err != nil {
			t.Fatalf("EnsureRiverDatabase as the server's administrator: %v", err)
		}
	}
	var exists bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil || !exists {
		t.Fatalf("database %s exists: %v (%v)", name, exists, err)
	}
}
