package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// JobTableDeps is what RunJobTable works with.
type JobTableDeps struct {
	// Pool holds the reservations schema.
	Pool *pgxpool.Pool
	// Jobs reaches the jobs table's database as a login that may update
	// the table's status, attempts, error and times (the team's own).
	Jobs *pgxpool.Pool
	// Table is SCHEMA.TABLE, shaped as docs/jobtable.md's example: id,
	// payload, status ('pending', 'done', 'failed'), attempt_count,
	// last_error, run_at and failed_at.
	Table string
	// MaxAttempts is the budget a transient failure spends, checked after
	// each run (default 7): a replayed job whose attempts were kept still
	// runs once more.
	MaxAttempts int
	// Backoff spaces a failed job's next run (default DefaultBackoff).
	Backoff Backoff
	// Concurrency is how many jobs are worked at once (default 4).
	Concurrency int
	// Out receives a line per job; nil discards them.
	Out io.Writer
}

// jobTablePoll is how long an idle poller waits before it looks again:
// short, because a replayed row is due at once and the demo waits for it.
const jobTablePoll = 100 * time.Millisecond

// jobTableWorkTimeout bounds one job's work once the poller is asked to
// stop, so that a row it holds locked is finished rather than abandoned.
const jobTableWorkTimeout = 15 * time.Second

// RunJobTable is the reference poller of a team's own jobs table, until
// ctx ends: each of Concurrency loops takes the oldest due pending row
// with SELECT … FOR UPDATE SKIP LOCKED, expires its reservation exactly
// once (ExpireOnce) and records the result on the row in the same
// transaction that holds it. A job that comes early is made due again at
// its reservation's deadline, spending no attempt; a permanent failure
// marks the row failed at once, and a transient one is retried after a
// backoff until MaxAttempts runs have failed.
//
// The expiry commits in the reservations database before the row's
// transaction does; should the row's commit be lost, the job runs again
// and its idempotency key makes that a Duplicate.
func RunJobTable(ctx context.Context, deps JobTableDeps) error {
	schema, table, ok := strings.Cut(deps.Table, ".")
	if !ok || schema == "" || table == "" {
		return fmt.Errorf("worker: jobs table %q is not SCHEMA.TABLE", deps.Table)
	}
	p := &poller{deps: deps, table: pgx.Identifier{schema, table}.Sanitize(), out: &riverLines{w: deps.Out}}
	if p.out.w == nil {
		p.out.w = io.Discard
	}
	if p.deps.MaxAttempts < 1 {
		p.deps.MaxAttempts = 7
	}
	if p.deps.Backoff == (Backoff{}) {
		p.deps.Backoff = DefaultBackoff
	}
	concurrency := deps.Concurrency
	if concurrency < 1 {
		concurrency = 4
	}
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				worked, err := p.once(ctx)
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				if !worked {
					select {
					case <-ctx.Done():
					case <-time.After(jobTablePoll):
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// poller is RunJobTable's state.
type poller struct {
	deps  JobTableDeps
	table string
	out   *riverLines
}

// once works the oldest due pending row, if there is one.
func (p *poller) once(ctx context.Context) (bool, error) {
	tx, err := p.deps.Jobs.Begin(ctx)
	if err != nil {
		return false, err
	}
	// The row is taken under ctx; once taken it is finished even if ctx
	// ends meanwhile, so that a stop leaves no job half done.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), jobTableWorkTimeout)
	defer cancel()
	defer tx.Rollback(work) //nolint:errcheck // after Commit, a no-op
	var id int64
	var payload []byte
	var attempts int
	err = tx.QueryRow(ctx, `SELECT id, payload::text, attempt_count FROM `+p.table+`
		WHERE status = 'pending' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &payload, &attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("worker: poll %s: %w", p.deps.Table, err)
	}
	job, err := DecodeJob(payload)
	outcome := Outcome("")
	if err == nil {
		outcome, err = ExpireOnce(work, p.deps.Pool, job)
	}
	var notDue *NotDueError
	var jobErr *JobError
	permanent := errors.As(err, &jobErr) && jobErr.Permanent
	switch {
	case err == nil:
		_, err = tx.Exec(work, `UPDATE `+p.table+` SET status = 'done', attempt_count = attempt_count + 1 WHERE id = $1`, id)
		p.out.printf("%s %s (job %d)", outcome, job.ReservationID, id)
	case errors.As(err, &notDue):
		_, err = tx.Exec(work, `UPDATE `+p.table+` SET run_at = now() + $2::interval WHERE id = $1`, id, notDue.Wait)
		p.out.printf("put back %s (job %d) for %s: not due yet", job.ReservationID, id, notDue.Wait.Round(time.Millisecond))
	case permanent || attempts+1 >= p.deps.MaxAttempts:
		p.out.printf("failed %s (job %d) for good after %d attempts: %v", job.ReservationID, id, attempts+1, err)
		_, err = tx.Exec(work, `UPDATE `+p.table+` SET status = 'failed', attempt_count = attempt_count + 1, last_error = $2,
			failed_at = clock_timestamp() WHERE id = $1`, id, err.Error())
	default:
		wait := p.deps.Backoff.Delay(attempts+1, rand.Float64()) //nolint:gosec // jitter, not a secret
		p.out.printf("failed %s (job %d, attempt %d), again in %s: %v", job.ReservationID, id, attempts+1, wait.Round(time.Millisecond), err)
		_, err = tx.Exec(work, `UPDATE `+p.table+` SET attempt_count = attempt_count + 1, last_error = $2,
			run_at = now() + $3::interval WHERE id = $1`, id, err.Error(), wait)
	}
	if err != nil {
		return true, fmt.Errorf("worker: record job %d of %s: %w", id, p.deps.Table, err)
	}
	if err := tx.Commit(work); err != nil {
		return true, fmt.Errorf("worker: record job %d of %s: %w", id, p.deps.Table, err)
	}
	return true, nil
}
