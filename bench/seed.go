package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedSQL fills expiryctl.dead_letters with $1 letters in one statement, so
// that the statement-level tally trigger runs once. The rows look like what
// ingest stores for worker dead letters: a ~200-byte JSON payload, ids and
// error text per letter, headers in expiryctl's encoding and a two-entry
// attempt history. Letters are spread over the span $5 before $2 in id order,
// as ingest would have stored them (ids grow with dead_lettered_at, give or
// take a few seconds of jitter). Categories are skewed the way an incident
// skews them; queues and statuses are mixed. Fingerprints are sha256 of the
// series number, so they are distinct.
//
// Building jsonb per row is what made seeding slow (about 15 µs a row for the
// two documents), so headers and history are built once per category and
// differ between letters only in being the category's: list, summary and
// export never read them, and the row keeps its realistic width.
const seedSQL = `
WITH kinds (kind, category, class, err) AS (VALUES
	(0, 'transient-exhausted', 'db_timeout', 'expire reservation %s: timeout: context deadline exceeded (SQLSTATE 57014) after 5s'),
	(1, 'transient-exhausted', 'throttled', 'expire reservation %s: 429 Too Many Requests from inventory-service'),
	(2, 'validation', 'validation', 'hold_until is before created_at for reservation %s'),
	(3, 'not-found', 'not_found', 'reservation %s not found'),
	(4, 'conflict', 'version_conflict', 'reservation %s is at version 4, job expected 3'),
	(5, 'malformed', NULL, NULL),
	(6, 'broker-expired', NULL, NULL),
	(7, 'broker-limit', NULL, NULL),
	(8, 'unknown', 'cosmic_ray', 'unexpected: bit flip in reservation %s')),
docs AS MATERIALIZED (
	SELECT kind, category, class, err,
		CASE WHEN class IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
			'x-error-class', class, 'x-last-error', format(err, 'r-0'),
			'x-original-exchange', 'reservations', 'x-original-routing-key', 'reservation.expire',
			'x-attempt-history', jsonb_build_array(
				jsonb_build_object('at', jsonb_build_object('$time', $2::timestamptz - interval '40 seconds'), 'error_class', class, 'error', format(err, 'r-0')),
				jsonb_build_object('at', jsonb_build_object('$time', $2::timestamptz), 'error_class', class, 'error', format(err, 'r-0'))))
		END AS headers,
		CASE WHEN class IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(
			jsonb_build_object('at', $2::timestamptz - interval '40 seconds', 'source', 'worker', 'error_class', class, 'error', format(err, 'r-0')),
			jsonb_build_object('at', $2::timestamptz, 'source', 'worker', 'error_class', class, 'error', format(err, 'r-0')))
		END AS history
	FROM kinds),
letters AS (
	SELECT g, at, r2,
		CASE WHEN r1 < 0.25 THEN 0 WHEN r1 < 0.40 THEN 1 WHEN r1 < 0.55 THEN 2 WHEN r1 < 0.67 THEN 3
		     WHEN r1 < 0.77 THEN 4 WHEN r1 < 0.82 THEN 5 WHEN r1 < 0.92 THEN 6 WHEN r1 < 0.97 THEN 7 ELSE 8 END AS kind,
		convert_to(format('{"reservation_id":"r-%s","expected_version":3,"hold_until":"2026-11-30T12:20:00Z",'
			'"idempotency_key":"expire:r-%s:v3","attempt":3,"tenant":"acme-eu-1","hold_id":"h-%s","not_before":null}',
			g, g, md5(g::text)), 'UTF8') AS body
	FROM (
		SELECT g, random() AS r1, random() AS r2,
			$2::timestamptz - $5::interval * (($1 - g)::float8 / $1) - interval '3 seconds' * random() AS at
		FROM generate_series($3::bigint, $4::bigint) AS g
	) AS raw)
INSERT INTO expiryctl.dead_letters (
	fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
	source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
	error_class, last_error, attempts, attempt_history, headers, content_type, payload,
	payload_sha256, payload_size, dead_lettered_at, ingested_at)
SELECT sha256(convert_to('bench-letter-' || l.g, 'UTF8')),
	'expire:r-' || l.g || ':v3', 'expire:r-' || l.g || ':v3', 'r-' || l.g, 'expire:r-' || l.g || ':v3', 3,
	l.at - interval '7 minutes',
	CASE WHEN l.g % 10 < 7 THEN 'reservation-expiry.dlq' WHEN l.g % 10 < 9 THEN 'reservation-expiry-eu.dlq'
	     ELSE 'billing-expiry.dlq' END,
	'reservation-expiry', 'reservations', 'reservation.expire', d.category,
	d.class, format(d.err, 'r-' || l.g), 3, d.history, d.headers, 'application/json', l.body, sha256(l.body), length(l.body),
	l.at, l.at + interval '1 second'
FROM letters l JOIN docs d USING (kind)`

// seedStatusSQL decides 15% of the seeded letters, 12% replayed and 3%
// discarded. Letters are inserted waiting, as ingest inserts them; their
// status lives in dead_letter_states, made by dead_letters' trigger.
const seedStatusSQL = `
UPDATE expiryctl.dead_letter_states s SET status = CASE WHEN d.r < 0.12 THEN 'replayed' ELSE 'discarded' END
FROM (SELECT dead_letter_id, random() AS r FROM expiryctl.dead_letter_states WHERE dead_letter_id BETWEEN $1 AND $2) d
WHERE s.dead_letter_id = d.dead_letter_id AND d.r < 0.15`

// seedArchive fills db with n letters over the span ending at end, the fast
// way: it drops the secondary indexes of the letters and their states (those
// backing no constraint), inserts in parallel chunks of one statement each,
// decides some of the letters' statuses the same way, recreates the indexes
// from the definitions it saved, in parallel, and finally vacuums and
// analyzes, so
// that plans and visibility are those of a settled archive, as autovacuum
// would leave one built by ingest over a month. The indexes come back exactly
// as the migrations made them; building them once is several times cheaper
// than maintaining them row by row, and with the insert being CPU-bound the
// chunks use both cores. Each chunk is one statement, so the statement-level
// tally triggers run once per chunk and the tallies stay exact.
func seedArchive(ctx context.Context, db *benchDB, n int, end time.Time, span time.Duration) (time.Duration, error) {
	start := time.Now()
	indexes, err := secondaryIndexes(ctx, db.Pool)
	if err != nil {
		return 0, err
	}
	for _, ix := range indexes {
		if _, err := db.Pool.Exec(ctx, "DROP INDEX "+ix.name); err != nil {
			return 0, fmt.Errorf("drop index %s for seeding: %w", ix.name, err)
		}
	}

	workers := max(1, min(runtime.NumCPU(), 4, n/50_000))
	chunks := make([]func(context.Context, *pgxpool.Conn) error, workers)
	for w := range workers {
		lo, hi := n*w/workers+1, n*(w+1)/workers
		chunks[w] = func(ctx context.Context, conn *pgxpool.Conn) error {
			if _, err := conn.Exec(ctx, seedSQL, n, end, lo, hi, span); err != nil {
				return fmt.Errorf("seed letters %d to %d: %w", lo, hi, err)
			}
			return nil
		}
	}
	if err := inParallel(ctx, db.Pool, workers, chunks); err != nil {
		return 0, err
	}
	var first, last int64
	if err := db.Pool.QueryRow(ctx, `SELECT min(id), max(id) FROM expiryctl.dead_letters`).Scan(&first, &last); err != nil {
		return 0, err
	}
	statuses := make([]func(context.Context, *pgxpool.Conn) error, workers)
	for w := range workers {
		lo, hi := first+(last-first+1)*int64(w)/int64(workers), first+(last-first+1)*int64(w+1)/int64(workers)-1
		statuses[w] = func(ctx context.Context, conn *pgxpool.Conn) error {
			if _, err := conn.Exec(ctx, seedStatusSQL, lo, hi); err != nil {
				return fmt.Errorf("seed the status of letters %d to %d: %w", lo, hi, err)
			}
			return nil
		}
	}
	if err := inParallel(ctx, db.Pool, workers, statuses); err != nil {
		return 0, err
	}

	builds := make([]func(context.Context, *pgxpool.Conn) error, len(indexes))
	for i, ix := range indexes {
		builds[i] = func(ctx context.Context, conn *pgxpool.Conn) error {
			if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '256MB'"); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, ix.definition); err != nil {
				return fmt.Errorf("recreate index %s: %w", ix.name, err)
			}
			return nil
		}
	}
	if err := inParallel(ctx, db.Pool, max(1, min(runtime.NumCPU(), 4)), builds); err != nil {
		return 0, err
	}
	after, err := secondaryIndexes(ctx, db.Pool)
	if err != nil {
		return 0, err
	}
	if len(after) != len(indexes) {
		return 0, fmt.Errorf("seeding left %d secondary indexes on the letters' tables, the migrations made %d", len(after), len(indexes))
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM (ANALYZE) expiryctl.dead_letters, expiryctl.dead_letter_states, expiryctl.dead_letter_tallies, expiryctl.dead_letter_class_tallies, expiryctl.dead_letter_due_tallies, expiryctl.dead_letter_arrival_tallies"); err != nil {
		return 0, fmt.Errorf("vacuum: %w", err)
	}
	return time.Since(start), nil
}

// seedSpan is the month an archive's letters span in the default run.
const seedSpan = 30 * 24 * time.Hour

type indexDef struct{ name, definition string }

// secondaryIndexes lists the indexes on dead_letters that back no
// constraint (so not the primary key nor the fingerprint's uniqueness),
// with the statements that create them.
func secondaryIndexes(ctx context.Context, pool *pgxpool.Pool) ([]indexDef, error) {
	rows, err := pool.Query(ctx, `
		SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
		FROM pg_index i
		WHERE i.indrelid IN ('expiryctl.dead_letters'::regclass, 'expiryctl.dead_letter_states'::regclass)
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
		ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (indexDef, error) {
		var d indexDef
		err := r.Scan(&d.name, &d.definition)
		return d, err
	})
}

// inParallel runs jobs on up to width connections of pool at once, each job
// on a connection of its own, and returns the first error.
func inParallel(ctx context.Context, pool *pgxpool.Pool, width int, jobs []func(context.Context, *pgxpool.Conn) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan func(context.Context, *pgxpool.Conn) error)
	errs := make(chan error, width)
	var wg sync.WaitGroup
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				cancel()
				return
			}
			defer func() {
				// The settings below must not outlive the seeding: the pool
				// serves the timed probes next.
				_, _ = conn.Exec(context.Background(), "RESET ALL")
				conn.Release()
			}()
			// Each statement is its own transaction with nothing to lose:
			// no reason to wait for a WAL flush at each commit.
			if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
				errs <- err
				cancel()
				return
			}
			for job := range next {
				if err := job(ctx, conn); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for _, job := range jobs {
		select {
		case next <- job:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}
