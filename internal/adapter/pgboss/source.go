package pgboss

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// Source captures the jobs pg-boss failed for good in one queue of a
// pg-boss database, for deadletter.Ingest: a pgjobs.Poller on pg-boss's
// job table, which it never changes. Acknowledging a delivery only frees
// its place in the prefetch: the jobs stay failed. A letter's fingerprint
// is the job's id and incarnation, its completed_on.
//
// Jobs come in (completed_on, id) order. pg-boss sets completed_on to the
// time its failing transaction began, which commits a moment later, so a
// job may become visible behind one already delivered: each poll reads
// again from Lookback before the newest delivered job. Capture needs only
// SELECT on SCHEMA.job and SCHEMA.queue (docs/pgboss.md); LoginStanding
// says when the login holds more (a superuser, the owner of the job
// table).
type Source struct {
	*pgjobs.Poller[string, jobRow]
}

// jobKey is a job's place in capture's order. Since an incarnation is
// completed_on, it is also a failure's identity. Its id is the job's uuid
// as PostgreSQL writes it (lower case, with hyphens), whose order as text
// is the uuid's own.
type jobKey = pgjobs.Key[string]

// zeroID is the least uuid, the id of the key before every job.
const zeroID = "00000000-0000-0000-0000-000000000000"

// idOrZero is a key's id for a statement: the least uuid for the key
// before every job.
func idOrZero(k jobKey) string {
	if k.ID == "" {
		return zeroID
	}
	return k.ID
}

// SourceOptions tunes a Source. Zero values take the defaults. Lookback
// must exceed the time pg-boss takes to commit a failure after it began
// the transaction; Reconnect is how long a lost pg-boss database is tried
// again.
type SourceOptions = pgjobs.Options

// OpenSource connects to the pg-boss database ref names and starts
// reading its queue's failed jobs. It fails at once when the database
// cannot be reached or has no pg-boss schema of a version it knows, and
// with a *QueueMissingError when pg-boss does not know the queue, rather
// than capture nothing from a misspelt one. The login needs SELECT on
// SCHEMA.job and SCHEMA.queue (docs/pgboss.md). Close releases the
// connections.
func OpenSource(ctx context.Context, ref Ref, opts SourceOptions) (*Source, error) {
	cfg, err := ref.PoolConfig()
	if err != nil {
		return nil, err
	}
	page, ahead, behind := ref.sql(pageSQL), ref.sql(readyAheadSQL), ref.sql(readyBehindSQL)
	p, err := pgjobs.OpenPoller(ctx, cfg, ref.jobStore(), check(ref), pgjobs.Queue[string, jobRow]{
		Name:   ref.Name(),
		Page:   func(from jobKey, n int) (string, []any) { return page, []any{ref.Queue, from.At, idOrZero(from), n} },
		Scan:   pgx.RowToStructByName[jobRow],
		Key:    jobRow.key,
		Letter: func(j jobRow) deadletter.Message { return j.stored(ref.Name()).Message() },
		Ahead: func(cursor jobKey) (string, []any) {
			return ahead, []any{ref.Queue, cursor.At, idOrZero(cursor)}
		},
		Behind: func(since time.Time, cursor jobKey) (string, []any) {
			return behind, []any{ref.Queue, since, cursor.At, cursor.ID}
		},
	}, opts)
	if err != nil {
		return nil, err
	}
	return &Source{p}, nil
}

// check checks, on a new pool, what the source and the retrier both need:
// pg-boss's tables of a version the driver knows, and the queue.
func check(ref Ref) pgjobs.Check {
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := probe(ctx, pool, ref); err != nil {
			return err
		}
		return checkQueue(ctx, pool, ref)
	}
}

// probe reads no row but every column the driver reads, so that a
// database without pg-boss, or with a pg-boss older than the columns,
// says so at once.
func probe(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	for _, stmt := range []string{probeSQL, probeQueueSQL} {
		rows, err := pool.Query(ctx, ref.sql(stmt))
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err == nil {
			continue
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703" || pgErr.Code == "3F000") {
			return fmt.Errorf("the pg-boss database %s has no pg-boss schema %q of pg-boss 12.36.0 or later (schema version 44), which this driver reads: %s "+
				"(is pg-boss's schema another? name it with ?schema=NAME in the connection's url)", ref.DatabaseName(), ref.Schema, pgErr.Message)
		}
		return fmt.Errorf("the pg-boss database %s: %w", ref.DatabaseName(), err)
	}
	return nil
}
