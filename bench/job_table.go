package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	connconfig "github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/replay"
)

// jobTableMapping maps the jobtable-* scenarios' table, a team's
// reservation-expiry jobs as the driver's tests shape them: failed_at
// makes the incarnation, three columns are kept as the table's own, and
// worker_host is left out.
var jobTableMapping = jobtable.Mapping{
	Table: "public.reservation_expiry_jobs",
	Columns: jobtable.Columns{
		ID: "id", Payload: "payload", Attempts: "attempt_count", LastError: "last_error",
		Status: "status", DueAt: "run_at", FailedAt: "failed_at", Marks: "expiryctl_marks",
		Native: []string{"reservation_id", "hold_until", "idempotency_key"},
	},
	FailedStates: []string{"failed", "dead"},
	ReplayState:  "pending",
}

// openJobTableStore makes a database of its own holding jobTableMapping's
// table, and nothing of expiryctl's, with n jobs failed after five
// attempts, their payloads the contract's JSON.
func openJobTableStore(ctx context.Context, cfg *config, n int) (*jobStore, error) {
	db, err := createEmptyDB(ctx, cfg.AdminURL, jobStorePurpose+"_table")
	if err != nil {
		return nil, err
	}
	st, err := jobTableStore(ctx, cfg, db, n)
	if err != nil {
		cfg.dropDB(db)
		return nil, err
	}
	return st, nil
}

func jobTableStore(ctx context.Context, cfg *config, db *benchDB, n int) (*jobStore, error) {
	for _, sql := range []string{`CREATE TABLE public.reservation_expiry_jobs (
			id bigserial PRIMARY KEY,
			reservation_id text NOT NULL,
			hold_until timestamptz NOT NULL,
			attempt_count int NOT NULL DEFAULT 0,
			idempotency_key text NOT NULL,
			payload jsonb NOT NULL,
			status text NOT NULL DEFAULT 'pending',
			last_error text,
			run_at timestamptz NOT NULL DEFAULT now(),
			failed_at timestamptz,
			worker_host text,
			expiryctl_marks jsonb)`,
		`CREATE INDEX reservation_expiry_jobs_status ON public.reservation_expiry_jobs (status, run_at)`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("the jobs table: %w", err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO public.reservation_expiry_jobs
		(reservation_id, hold_until, attempt_count, idempotency_key, payload, status, last_error, run_at, failed_at, worker_host)
		SELECT 'r-' || i, now() + interval '15 minutes', 5, 'expire:r-' || i || ':v3',
			jsonb_build_object('reservation_id', 'r-' || i, 'expected_version', 3, 'hold_until', '2026-11-30T12:20:00Z',
				'idempotency_key', 'expire:r-' || i || ':v3'),
			'failed', 'db_timeout: canceling statement due to statement timeout', f, f, 'worker-7'
		FROM generate_series(1, $1) AS i, LATERAL (SELECT now() - interval '1 hour' + i * interval '1 millisecond' AS f) AS t`, n); err != nil {
		return nil, fmt.Errorf("fail %d jobs in the jobs table: %w", n, err)
	}
	if err := db.settle(ctx, cfg.logf); err != nil {
		return nil, err
	}
	ref, err := jobtable.RefFor(connconfig.Connection{Name: "bench", URLs: []string{db.URL}}, "", jobTableMapping.Table)
	if err != nil {
		return nil, err
	}
	queue := ref.Name()
	poolCfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		return nil, err
	}
	poolCfg.MaxConns = jobStoreRetriers + 1
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	return &jobStore{
		system: jobtable.System, queue: queue,
		openSource: func(ctx context.Context, prefetch int) (deadletter.ClosableSource, error) {
			return jobtable.OpenSource(ctx, ref, jobTableMapping, jobtable.SourceOptions{Prefetch: prefetch})
		},
		openBareRead: func(ctx context.Context) (bareRead, func(), error) {
			return pgBareRead(ctx, db.URL, jobTableBareSelect, jobTableMapping.FailedStates)
		},
		bareReadName: "SELECT of the failed rows' mapped columns",
		fail: func(ctx context.Context) error {
			// As the team's poller fails a job for good: a new failed_at
			// is a new incarnation.
			_, err := db.Pool.Exec(ctx, `UPDATE public.reservation_expiry_jobs SET status = 'failed',
				failed_at = clock_timestamp(), expiryctl_marks = NULL`)
			return err
		},
		retried: func(ctx context.Context) (int, error) {
			var got int
			err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM public.reservation_expiry_jobs WHERE status = 'pending'`).Scan(&got)
			return got, err
		},
		openRetrier: func(ctx context.Context) (replay.Broker, error) {
			return jobtable.OpenRetrier(ctx, ref, jobTableMapping, jobtable.RetrierOptions{})
		},
		bareRetry: func(ctx context.Context, jobs []replay.JobRef) error {
			return concurrently(ctx, jobs, jobStoreRetriers, func(ctx context.Context, job replay.JobRef) error {
				_, err := pool.Exec(ctx, `UPDATE public.reservation_expiry_jobs SET status = 'pending', run_at = now() WHERE id = $1::bigint`, job.ID)
				return err
			})
		},
		bareRetryName:      "UPDATE … SET status by id",
		retrierConcurrency: jobStoreRetriers,
		close: func() {
			pool.Close()
			cfg.dropDB(db)
		},
	}, nil
}

// jobTableBareSelect is the jobs table's baseline: one SELECT of the
// columns the mapping names for the rows in a failed state, in capture's
// order. The source reads a page of keys, then those rows by id with their
// incarnation, in read-only transactions, and turns each into a letter.
const jobTableBareSelect = `SELECT id, payload, attempt_count, last_error, status, run_at, failed_at, expiryctl_marks,
	reservation_id, hold_until, idempotency_key
	FROM public.reservation_expiry_jobs WHERE status = ANY($1) ORDER BY failed_at, id`
