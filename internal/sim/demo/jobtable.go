package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// JobTable is the team's jobs table the jobs-table incident stages, as
// SCHEMA.TABLE: the seed articles' reservation-expiry jobs, in the shape
// docs/jobtable.md shows and `expiryctl worker --job-table` polls.
const JobTable = "public.reservation_expiry_jobs"

// jobTableDDL is docs/jobtable.md's example table. The demo creates it
// only when it is missing, so that a second demo finds the first's rows.
const jobTableDDL = `
CREATE TABLE IF NOT EXISTS public.reservation_expiry_jobs (
	id              bigserial PRIMARY KEY,
	reservation_id  text NOT NULL,
	hold_until      timestamptz NOT NULL,
	attempt_count   int NOT NULL DEFAULT 0,
	idempotency_key text NOT NULL,
	payload         jsonb NOT NULL,
	status          text NOT NULL DEFAULT 'pending',
	last_error      text,
	run_at          timestamptz NOT NULL DEFAULT now(),
	failed_at       timestamptz,
	expiryctl_marks jsonb
);
CREATE INDEX IF NOT EXISTS reservation_expiry_jobs_status ON public.reservation_expiry_jobs (status, run_at);`

// JobTableMapping is the mapping of JobTable that an admin proposes and a
// second approves before expiryctl may capture or replay it, in the JSON
// the policy's job_tables holds (docs/jobtable.md): data, read by the
// jobs-table driver, which this package, a floor above it, does not import.
const JobTableMapping = `{"table": "` + JobTable + `",
 "columns": {"id": "id", "payload": "payload", "attempts": "attempt_count", "last_error": "last_error",
  "status": "status", "due_at": "run_at", "failed_at": "failed_at", "marks": "expiryctl_marks",
  "native": ["reservation_id", "hold_until", "idempotency_key"]},
 "failed_states": ["failed"], "replay_state": "pending"}`

// JobTableDeps is what RunJobTable works with.
type JobTableDeps struct {
	// Jobs reaches the team's database, a database of its own, as a login
	// that may create the table and grant on it (its owner).
	Jobs *pgxpool.Pool
	// Grants are run on the table once it exists: jobtable.GrantSQL's
	// statements for the login expiryctl captures and replays it as.
	Grants []string
	// RunID is in every reservation id of the run.
	RunID string
	// Pool holds the reservations schema, as RiverDeps.Pool does.
	Pool *pgxpool.Pool
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// JobTableResult is what RunJobTable staged.
type JobTableResult struct {
	// Jobs are the ids of the rows the poller failed.
	Jobs []int64
	// Attempts is how many times the poller ran each before giving up.
	Attempts int
}

// jobTableJobs and jobTableAttempts size the incident as River's.
const (
	jobTableJobs     = 4
	jobTableAttempts = 2
)

// errStatementTimeout is what the team's poller meets during the
// incident: its database cancels every statement.
var errStatementTimeout = errors.New("ERROR: canceling statement due to statement timeout (SQLSTATE 57014) (simulated by expiryctl demo)")

// RunJobTable stages an incident on a team's own jobs table beside the
// others: it creates JobTable when missing, grants Login what expiryctl
// needs, inserts expiry jobs whose reservations are due, and runs the
// team's poller while its database times out, until it has marked every
// job failed.
func RunJobTable(ctx context.Context, deps JobTableDeps) (JobTableResult, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	out := &progress{w: deps.Out}
	if out.w == nil {
		out.w = io.Discard
	}
	if deps.Jobs == nil || deps.Pool == nil {
		return JobTableResult{}, errors.New("demo: the jobs table's database and the reservations' are both required")
	}
	if _, err := deps.Jobs.Exec(ctx, jobTableDDL); err != nil {
		return JobTableResult{}, fmt.Errorf("demo: create the jobs table %s: %w", JobTable, err)
	}
	for _, g := range deps.Grants {
		if _, err := deps.Jobs.Exec(ctx, g); err != nil {
			return JobTableResult{}, fmt.Errorf("demo: grant expiryctl's login what it needs on %s: %w", JobTable, err)
		}
	}

	var seeds []seed
	var reservations, keys, payloads []string
	var holds []time.Time
	for i := range jobTableJobs {
		id := fmt.Sprintf("r-%s-jobtable-%d", deps.RunID, i)
		due := time.Now().Add(-time.Minute)
		seeds = append(seeds, seed{id: id, status: "held", version: 4, holdUntil: due, units: 1})
		reservations = append(reservations, id)
		keys = append(keys, fmt.Sprintf("expire:%s:v%d", id, 4))
		payloads = append(payloads, contractJob(id, 4, due))
		holds = append(holds, due)
	}
	if err := worker.EnsureSchema(ctx, deps.Pool); err != nil {
		return JobTableResult{}, fmt.Errorf("demo: %w", err)
	}
	if err := seedReservations(ctx, deps.Pool, seeds); err != nil {
		return JobTableResult{}, err
	}
	res := JobTableResult{Attempts: jobTableAttempts}
	rows, err := deps.Jobs.Query(ctx, `INSERT INTO public.reservation_expiry_jobs (reservation_id, hold_until, idempotency_key, payload)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::jsonb[]) RETURNING id`, reservations, holds, keys, payloads)
	if err == nil {
		res.Jobs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return JobTableResult{}, fmt.Errorf("demo: insert into %s: %w", JobTable, err)
	}
	out.printf("jobs table %s: %d expiry jobs r-%s-jobtable-*, and a poller whose database times out, giving up after %d attempts",
		JobTable, len(res.Jobs), deps.RunID, jobTableAttempts)
	if err := waitFor(ctx, "the poller to fail the jobs", func() (bool, error) {
		return failDueJobs(ctx, deps.Jobs, res.Jobs)
	}); err != nil {
		return res, err
	}
	out.printf("staged on the jobs table: the poller marked %d jobs failed after %d attempts each (statement timeout)", len(res.Jobs), jobTableAttempts)
	return res, nil
}

// failDueJobs is one round of the team's poller during the incident: it
// takes each due pending job of ids as a poller does (FOR UPDATE SKIP
// LOCKED) and fails it, due again at once until its last attempt, when it
// is marked failed. It says whether every job of ids is failed.
func failDueJobs(ctx context.Context, jobs *pgxpool.Pool, ids []int64) (bool, error) {
	for {
		var took bool
		err := pgx.BeginFunc(ctx, jobs, func(tx pgx.Tx) error {
			var id int64
			err := tx.QueryRow(ctx, `SELECT id FROM public.reservation_expiry_jobs
				WHERE id = ANY($1) AND status = 'pending' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, ids).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			took = true
			_, err = tx.Exec(ctx, `UPDATE public.reservation_expiry_jobs SET attempt_count = attempt_count + 1, last_error = $2,
				status = CASE WHEN attempt_count + 1 >= $3 THEN 'failed' ELSE status END,
				failed_at = CASE WHEN attempt_count + 1 >= $3 THEN clock_timestamp() END
				WHERE id = $1`, id, errStatementTimeout.Error(), jobTableAttempts)
			return err
		})
		if err != nil {
			return false, err
		}
		if !took {
			break
		}
	}
	var failed int
	err := jobs.QueryRow(ctx, `SELECT count(*) FROM public.reservation_expiry_jobs WHERE id = ANY($1) AND status = 'failed'`, ids).Scan(&failed)
	return failed == len(ids), err
}
