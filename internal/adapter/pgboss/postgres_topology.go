package pgboss

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// topologySQL counts queue $1's jobs by the states of work (created,
// retry, active, failed: what pg-boss's own index of live jobs holds) and
// the age of the oldest of the ready and of the failed ones, by the
// database's clock. A created or retry job not blocked by a flow and
// whose start_after has come is ready: a worker's next fetch takes it.
const topologySQL = `SELECT
		count(*) FILTER (WHERE ready),
		extract(epoch FROM now() - min(start_after) FILTER (WHERE ready))::float8,
		count(*) FILTER (WHERE state = 'active'),
		count(*) FILTER (WHERE state < 'active' AND NOT ready),
		count(*) FILTER (WHERE state = 'failed'),
		extract(epoch FROM now() - min(completed_on) FILTER (WHERE state = 'failed'))::float8
	FROM (SELECT state, start_after, completed_on,
			state < 'active' AND NOT blocked AND start_after <= now() AS ready
		FROM {job} WHERE name = $1 AND state IN ('created', 'retry', 'active', 'failed')) AS j`

// Topology reads what pg-boss's queue holds now, by state, as the states
// of work `dlq summary` shows beside the archive:
//
//   - the work queue: created and retry jobs whose start_after has come
//     and that no flow blocks are ready, HeadAge the wait of the oldest
//     of them since it became due (its start_after); active ones are in
//     flight;
//   - pg-boss's own retry queue: created and retry jobs not yet due
//     (deferred by startAfter, or waiting out retryDelay), and those a
//     flow blocks, are scheduled;
//   - the dead-letter queue: failed jobs are isolated, HeadAge the age of
//     the oldest of them since pg-boss gave up on it (completed_on). They
//     stay there once captured, until pg-boss's maintenance deletes them.
//
// Completed and cancelled jobs are work done and are not counted. pg-boss
// keeps counts of its own in the queue row, but only while a supervising
// instance runs its monitor, so they are read from the jobs instead.
// Workers and rates stay unknown (0 and nil): pg-boss records neither per
// queue. The session is read-only. A database that cannot be reached, or
// that pg-boss's tables are missing from, is not an error: the report's
// Unavailable says so. A queue pg-boss does not know is: a
// *QueueMissingError, its text in the report's Unavailable too, for a
// caller that shows rather than maps it.
func Topology(ctx context.Context, ref Ref) (deadletter.QueueReport, error) {
	cfg, err := ref.PoolConfig()
	if err != nil {
		return deadletter.QueueReport{}, err
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.MaxConns = 1
	unavailable := func(err error) (deadletter.QueueReport, error) {
		return deadletter.QueueReport{Unavailable: fmt.Sprintf("the pg-boss database %s: %v", ref.DatabaseName(), err)}, nil
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
	missing, err := queueMissing(ctx, tx, ref)
	if err != nil {
		return unavailable(err)
	}
	if missing != nil {
		return deadletter.QueueReport{Unavailable: missing.Error()}, missing
	}
	var (
		ready, active, waiting, failed int64
		readyAge, failedAge            *float64
	)
	err = tx.QueryRow(ctx, ref.sql(topologySQL), ref.Queue).Scan(&ready, &readyAge, &active, &waiting, &failed, &failedAge)
	if err != nil {
		return unavailable(err)
	}
	name := ref.Name()
	return deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: name, Role: deadletter.RoleWork, Ready: ready, Unacked: active, HeadAge: age(readyAge)},
		{Name: name + " (deferred, retrying, blocked)", Role: deadletter.RoleRetry, Ready: waiting},
		{Name: name + " (failed)", Role: deadletter.RoleDeadLetter, Ready: failed, HeadAge: age(failedAge)},
	}}, nil
}

// age is seconds as a duration, nil when there were none (no job to be
// the oldest); never negative, whatever the clocks said.
func age(seconds *float64) *time.Duration {
	if seconds == nil {
		return nil
	}
	d := max(time.Duration(*seconds*float64(time.Second)), 0)
	return &d
}
