package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// riverQueue is the River queue the river-* scenarios fill.
const riverQueue = "expiry"

// jobStoreRetriers is the concurrency riverjobs.OpenRetrier and
// jobtable.OpenRetrier default to, which `replay run` keeps: each retry is
// a transaction on a connection of its own.
const jobStoreRetriers = 8

// openRiverStore makes a database of its own with River's schema at the
// latest migration of the River module in go.mod (rivermigrate, as River's
// own CLI migrates) and nothing of expiryctl's, and discards n jobs in
// queue expiry the way River's completer leaves them: the contract's args
// and a two-attempt error history.
func openRiverStore(ctx context.Context, cfg *config, n int) (*jobStore, error) {
	db, err := createEmptyDB(ctx, cfg.AdminURL, jobStorePurpose+"_river")
	if err != nil {
		return nil, err
	}
	st, err := riverStore(ctx, cfg, db, n)
	if err != nil {
		cfg.dropDB(db)
		return nil, err
	}
	return st, nil
}

func riverStore(ctx context.Context, cfg *config, db *benchDB, n int) (*jobStore, error) {
	migrator, err := rivermigrate.New(riverpgxv5.New(db.Pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("a migrator of River's schema: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate %s to River's schema: %w", db.Name, err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO river_job (state, attempt, max_attempts, attempted_at, finalized_at, args, attempted_by, errors, kind, queue)
		SELECT 'discarded', 2, 2, f, f,
			jsonb_build_object('reservation_id', 'r-' || i, 'idempotency_key', 'expire:r-' || i || ':v1', 'expected_version', 3),
			'{host-1}',
			ARRAY[jsonb_build_object('at', f, 'attempt', 1, 'error', 'db_timeout: first', 'trace', 'goroutine 1 [running]:'),
			      jsonb_build_object('at', f, 'attempt', 2, 'error', 'db_timeout: last', 'trace', '')],
			'reservation_expiry', $2
		FROM generate_series(1, $1) AS i, LATERAL (SELECT now() - interval '1 hour' + i * interval '1 millisecond' AS f) AS t`, n, riverQueue); err != nil {
		return nil, fmt.Errorf("discard %d River jobs: %w", n, err)
	}
	if err := db.settle(ctx, cfg.logf); err != nil {
		return nil, err
	}
	ref, err := riverRef(db.URL, riverQueue)
	if err != nil {
		return nil, err
	}
	// The bare retries' client and connections are made once, as the
	// retrier's are, so that neither side's timing has a dial in it.
	poolCfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		return nil, err
	}
	poolCfg.MaxConns = jobStoreRetriers + 1
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("a River client on %s: %w", db.Name, err)
	}
	return &jobStore{
		system: riverjobs.System, queue: ref.Name(),
		openSource: func(ctx context.Context, prefetch int) (deadletter.ClosableSource, error) {
			return riverjobs.OpenSource(ctx, ref, riverjobs.SourceOptions{Prefetch: prefetch})
		},
		openBareRead: func(ctx context.Context) (bareRead, func(), error) {
			return pgBareRead(ctx, db.URL, riverBareSelect, riverQueue)
		},
		bareReadName: "SELECT of the discarded jobs' columns",
		fail: func(ctx context.Context) error {
			// As River's completer discards a job that ran out of
			// attempts again: a new finalized_at is a new incarnation.
			_, err := db.Pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', attempt = 2, max_attempts = 2,
				finalized_at = clock_timestamp(), metadata = '{}' WHERE queue = $1`, riverQueue)
			return err
		},
		retried: func(ctx context.Context) (int, error) {
			var got int
			err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state = 'available'`, riverQueue).Scan(&got)
			return got, err
		},
		openRetrier: func(ctx context.Context) (replay.Broker, error) {
			return riverjobs.OpenRetrier(ctx, ref, riverjobs.RetrierOptions{})
		},
		bareRetry: func(ctx context.Context, jobs []replay.JobRef) error {
			return concurrently(ctx, jobs, jobStoreRetriers, func(ctx context.Context, job replay.JobRef) error {
				id, err := strconv.ParseInt(job.ID, 10, 64)
				if err != nil {
					return err
				}
				_, err = client.JobRetry(ctx, id)
				return err
			})
		},
		bareRetryName:      "River's Client.JobRetry",
		retrierConcurrency: jobStoreRetriers,
		close: func() {
			pool.Close()
			cfg.dropDB(db)
		},
	}, nil
}

// riverRef names queue in the database dbURL reaches, as its login.
func riverRef(dbURL, queue string) (riverjobs.Ref, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return riverjobs.Ref{}, err
	}
	r := url.URL{Scheme: "river", User: u.User, Host: u.Host, Path: u.Path + "/" + queue}
	if mode := u.Query().Get("sslmode"); mode != "" {
		r.RawQuery = "sslmode=" + url.QueryEscape(mode)
	}
	return riverjobs.ParseRef(r.String())
}

// riverBareSelect is the River baseline: one SELECT of every column the
// source reads of the discarded jobs, in its order. The source reads pages
// of 500 in read-only transactions and turns each row into a letter; the
// ratio is what that costs.
const riverBareSelect = `SELECT id, kind, args, attempt, max_attempts, errors, finalized_at, queue, state::text,
	priority, created_at, scheduled_at, attempted_at, tags, metadata, attempted_by, unique_key
	FROM river_job WHERE state = 'discarded' AND queue = $1 ORDER BY finalized_at, id`

// pgBareRead opens a connection to dbURL for a phase of bare reads: each
// runs query with args and decodes every row with pgx, nothing more. One
// connection serves the phase's rounds, closed after its CPU was read: a
// backend that ends between two of the monitor's samples is not counted.
func pgBareRead(ctx context.Context, dbURL, query string, args ...any) (bareRead, func(), error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	read := func(ctx context.Context, n int) error {
		rows, err := conn.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		return countRows(rows, n)
	}
	return read, func() { _ = conn.Close(context.WithoutCancel(ctx)) }, nil
}

// countRows decodes every row and checks that there were n.
func countRows(rows pgx.Rows, n int) error {
	got := 0
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			rows.Close()
			return err
		}
		got++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("read %d rows, want %d", got, n)
	}
	return nil
}
