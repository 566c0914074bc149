package riverjobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// Source captures the jobs River discarded (and cancelled, when the
// reference asks) in one queue of a River database, for deadletter.Ingest:
// a pgjobs.Poller on river_job, which it never changes. Acknowledging a
// delivery only frees its place in the prefetch: the jobs stay discarded.
// A letter's fingerprint is the job's id and incarnation, its
// finalized_at.
//
// Jobs come in (finalized_at, id) order. River sets finalized_at from the
// clock of the client that ran the job, and that client commits it a
// moment later, so a job may become visible behind one already delivered:
// each poll reads again from Lookback before the newest delivered job.
// Capture needs only SELECT on river_job (docs/river.md); LoginStanding
// says when the login holds more (a superuser, the owner of river_job).
type Source struct {
	*pgjobs.Poller[int64, jobRow]
}

// SourceOptions tunes a Source. Zero values take the defaults. Lookback
// must exceed the clock skew between River's clients plus the time River
// takes to commit a job it finished; Reconnect is how long a lost River
// database is tried again.
type SourceOptions = pgjobs.Options

// OpenSource connects to the River database ref names and starts reading
// its queue. It fails at once when the database cannot be reached or has
// no river_job table of a River version it knows, and with a
// *QueueMissingError when River does not know the queue (no river_queue
// row and no job names it), rather than capture nothing from a misspelt
// one. Close releases the connections.
func OpenSource(ctx context.Context, ref Ref, opts SourceOptions) (*Source, error) {
	if len(ref.States) == 0 {
		ref.States = []string{StateDiscarded}
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		return nil, err
	}
	page := pageQuery(ref.States)
	p, err := pgjobs.OpenPoller(ctx, cfg, ref.jobStore(), check(ref), pgjobs.Queue[int64, jobRow]{
		Name:   ref.Name(),
		Page:   func(from jobKey, n int) (string, []any) { return page, []any{ref.Queue, from.At, from.ID, n} },
		Scan:   func(r pgx.CollectableRow) (jobRow, error) { return scanJob(r) },
		Key:    jobRow.key,
		Letter: func(j jobRow) deadletter.Message { return j.stored(ref.Name()).Message() },
		Ahead: func(cursor jobKey) (string, []any) {
			return readyAheadSQL, []any{ref.States, ref.Queue, cursor.At, cursor.ID}
		},
		Behind: func(since time.Time, cursor jobKey) (string, []any) {
			return readyBehindSQL, []any{ref.States, ref.Queue, since, cursor.At, cursor.ID}
		},
	}, opts)
	if err != nil {
		return nil, err
	}
	return &Source{p}, nil
}

// check checks, on a new pool, what the source and the retrier both need:
// a river_job table of a River version the driver knows, and the queue.
func check(ref Ref) pgjobs.Check {
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := probe(ctx, pool, ref); err != nil {
			return err
		}
		return checkQueue(ctx, pool, ref)
	}
}

// probe reads no row but every column capture reads, so that a database
// without River, or with a River older than the columns, says so at once.
func probe(ctx context.Context, pool *pgxpool.Pool, ref Ref) error {
	rows, err := pool.Query(ctx, "SELECT "+jobColumns+" FROM river_job LIMIT 0")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return fmt.Errorf("the River database %s has no river_job table of River 0.10 or later (River's migration 005 or later): %s", ref.DatabaseName(), pgErr.Message)
	}
	return fmt.Errorf("the River database %s: %w", ref.DatabaseName(), err)
}

// pageQuery reads one page of the queue's jobs in states after a key, in
// order. One ordered subquery per state lets each walk the (state,
// finalized_at) index River keeps and stop at the page's end, rather than
// sort every failed job of the table on each page.
func pageQuery(states []string) string {
	parts := make([]string, len(states))
	for i, st := range states {
		// st is one of the constants: parseStates admits nothing else.
		parts[i] = `(SELECT ` + jobColumns + ` FROM river_job
			WHERE state = '` + st + `' AND queue = $1 AND finalized_at >= $2 AND (finalized_at, id) > ($2, $3)
			ORDER BY finalized_at, id LIMIT $4)`
	}
	if len(parts) == 1 {
		return parts[0]
	}
	// The outer select names the columns by position: the subqueries'
	// expressions have no names of their own.
	return `SELECT * FROM (` + strings.Join(parts, " UNION ALL ") + `) AS j ORDER BY 7, 1 LIMIT $4`
}
