package demo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// TestRunJobTableStagesTheIncident stages the jobs-table incident in an
// empty database: the table, created as the mapping says, contract jobs
// for due reservations, and a poller that times out until it marks every
// job failed. The login is granted exactly what the mapping needs, which
// the driver's own checks accept. A second run on the same table stages a
// second incident.
func TestRunJobTableStagesTheIncident(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	jobs := pgtest.NewEmpty(t)
	login := jobs.Login(t, "jobs")
	t.Cleanup(func() {
		_, _ = jobs.Pool.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{login.Name}.Sanitize())
	})

	mapping, err := jobtable.ParseMapping([]byte(demo.JobTableMapping))
	if err != nil {
		t.Fatal(err)
	}
	grants, err := jobtable.GrantSQL(mapping, login.Name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := demo.RunJobTable(ctx, demo.JobTableDeps{Jobs: jobs.Pool, Grants: grants, Pool: db.Pool, RunID: "run1"})
	if err != nil {
		t.Fatalf("RunJobTable: %v", err)
	}
	if len(res.Jobs) != 4 || res.Attempts != 2 {
		t.Fatalf("staged %d jobs with %d attempts, want 4 with 2", len(res.Jobs), res.Attempts)
	}
	if err := mapping.Validate(ctx, jobs.Pool); err != nil {
		t.Fatalf("the mapping does not fit the table it staged: %v", err)
	}
	for _, id := range res.Jobs {
		var status, lastError string
		var attempts int
		var payload []byte
		var failed bool
		if err := jobs.Pool.QueryRow(ctx, `SELECT status, attempt_count, coalesce(last_error, ''), payload::text::bytea, failed_at IS NOT NULL
			FROM public.reservation_expiry_jobs WHERE id = $1`, id).Scan(&status, &attempts, &lastError, &payload, &failed); err != nil {
			t.Fatal(err)
		}
		if status != "failed" || attempts != 2 || !failed || !strings.Contains(lastError, "statement timeout") {
			t.Errorf("job %d: %s after %d attempts, failed_at %v, last error %q; want failed after 2 timeouts", id, status, attempts, failed, lastError)
		}
		job, err := worker.DecodeJob(payload)
		if err != nil {
			t.Fatalf("job %d: payload %s is not a contract job: %v", id, payload, err)
		}
		var held, due bool
		if err := db.Pool.QueryRow(ctx, `SELECT status = 'held' AND version = $2, hold_until < now() FROM reservations.reservations WHERE id = $1`,
			job.ReservationID, job.ExpectedVersion).Scan(&held, &due); err != nil || !held || !due || !strings.Contains(job.ReservationID, "run1-jobtable") {
			t.Errorf("job %d's reservation %s: held at its version %v, due %v (%v)", id, job.ReservationID, held, due, err)
		}
	}

	// The login may read the mapped columns, as capture does, and no other.
	var granted int
	if err := jobs.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.column_privileges WHERE grantee = $1`, login.Name).Scan(&granted); err != nil {
		t.Fatal(err)
	}
	if granted != 11+3 || len(grants) != 3 {
		t.Errorf("%s holds %d column privileges from %d statements, want GrantSQL's 11 SELECT and 3 UPDATE", login.Name, granted, len(grants))
	}

	again, err := demo.RunJobTable(ctx, demo.JobTableDeps{Jobs: jobs.Pool, Grants: grants, Pool: db.Pool, RunID: "run2"})
	if err != nil || len(again.Jobs) != 4 {
		t.Fatalf("a second RunJobTable: %d jobs, %v; want 4 more", len(again.Jobs), err)
	}
}
