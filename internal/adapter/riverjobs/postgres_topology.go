package riverjobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// topologyStates are the states of the work that Topology counts besides
// the captured ones: every state but completed, which is work done, and
// cancelled when the reference does not capture it.
var topologyStates = []string{"available", "running", "retryable", "scheduled", "pending"}

// topologySQL counts queue $1's jobs by the states of work ($2, every
// state read, which lets the (state, queue, …) index serve the read) and
// the age of the oldest of the ready and of the isolated ones ($3, the
// captured states), by the database's clock. A retryable or scheduled job
// whose time has come is ready: only River's scheduler, every few
// seconds, stands between it and a worker, as QueueDepth counts it.
const topologySQL = `SELECT
		count(*) FILTER (WHERE ready),
		extract(epoch FROM now() - min(coalesce(scheduled_at, created_at)) FILTER (WHERE ready))::float8,
		count(*) FILTER (WHERE state = 'running'),
		count(*) FILTER (WHERE state = 'pending' OR (state IN ('retryable', 'scheduled') AND NOT ready)),
		count(*) FILTER (WHERE state = ANY ($3::text[]::river_job_state[])),
		extract(epoch FROM now() - min(finalized_at) FILTER (WHERE state = ANY ($3::text[]::river_job_state[])))::float8
	FROM (SELECT state, scheduled_at, created_at, finalized_at,
			state = 'available' OR (state IN ('retryable', 'scheduled') AND scheduled_at <= now()) AS ready
		FROM river_job WHERE state = ANY ($2::text[]::river_job_state[]) AND queue = $1) AS j`

// Topology reads what River's queue holds now, by state, as the states of
// work `dlq summary` shows beside the archive:
//
//   - the work queue: available jobs, and retryable or scheduled ones
//     whose time has come, are ready, HeadAge the wait of the oldest of
//     them since it became due (its scheduled_at, else created_at);
//     running ones are in flight;
//   - River's own retry queue: retryable and scheduled jobs not yet due,
//     and pending ones (waiting on other jobs), are scheduled;
//   - the dead-letter queue: jobs in the captured states (discarded, and
//     cancelled when the reference asks) are isolated, HeadAge the age of
//     the oldest of them since River gave up on it (finalized_at). They
//     stay there once captured, until River's cleaner deletes them.
//
// Completed jobs are work done and are not counted. River records no
// workers and no rates, so those stay unknown (0 and nil). The session is
// read-only. A database that cannot be reached, or that River's tables
// are missing from, is not an error: the report's Unavailable says so. A
// queue River does not know is: a *QueueMissingError, its text in the
// report's Unavailable too, for a caller that shows rather than maps it.
func Topology(ctx context.Context, ref Ref) (deadletter.QueueReport, error) {
	if len(ref.States) == 0 {
		ref.States = []string{StateDiscarded}
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		return deadletter.QueueReport{}, err
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.MaxConns = 1
	unavailable := func(err error) (deadletter.QueueReport, error) {
		return deadletter.QueueReport{Unavailable: fmt.Sprintf("the River database %s: %v", ref.DatabaseName(), err)}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return unavailable(err)
	}
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return unavailable(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to undo
	var (
		ready, running, waiting, isolated int64
		readyAge, isolatedAge             *float64
	)
	err = tx.QueryRow(ctx, topologySQL, ref.Queue, append(append([]string{}, topologyStates...), ref.States...), ref.States).
		Scan(&ready, &readyAge, &running, &waiting, &isolated, &isolatedAge)
	if err != nil {
		return unavailable(err)
	}
	if ready+running+waiting+isolated == 0 {
		missing, err := queueMissing(ctx, tx, ref)
		if err != nil {
			return unavailable(err)
		}
		if missing != nil {
			return deadletter.QueueReport{Unavailable: missing.Error()}, missing
		}
	}
	name := ref.Name()
	return deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: name, Role: deadletter.RoleWork, Ready: ready, Unacked: running, HeadAge: age(readyAge)},
		{Name: name + " (retryable, scheduled, pending)", Role: deadletter.RoleRetry, Ready: waiting},
		{Name: name + " (" + strings.Join(ref.States, ", ") + ")", Role: deadletter.RoleDeadLetter, Ready: isolated, HeadAge: age(isolatedAge)},
	}}, nil
}

// age is seconds as a duration, nil when there were none (no job to be
// the oldest); never negative, whatever the clocks of River's clients
// said.
func age(seconds *float64) *time.Duration {
	if seconds == nil {
		return nil
	}
	d := max(time.Duration(*seconds*float64(time.Second)), 0)
	return &d
}
