package main

import (
	"context"
	"fmt"
	"time"
)

// seedSQL fills expiryctl.dead_letters with $1 letters in one statement, so
// that the statement-level tally trigger runs once. The rows look like what
// ingest stores for worker dead letters: a ~200-byte JSON payload, ids and
// error text per letter, headers in expiryctl's encoding and a two-entry
// attempt history. Letters are spread over the 30 days before $2 in id order,
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
			$2::timestamptz - interval '30 days' * (($1 - g)::float8 / $1) - interval '3 seconds' * random() AS at
		FROM generate_series(1, $1::bigint) AS g
	) AS raw)
INSERT INTO expiryctl.dead_letters (
	fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
	source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
	error_class, last_error, attempts, attempt_history, headers, content_type, payload,
	payload_sha256, payload_size, dead_lettered_at, status)
SELECT sha256(convert_to('bench-letter-' || l.g, 'UTF8')),
	'expire:r-' || l.g || ':v3', 'expire:r-' || l.g || ':v3', 'r-' || l.g, 'expire:r-' || l.g || ':v3', 3,
	l.at - interval '7 minutes',
	CASE WHEN l.g % 10 < 7 THEN 'reservation-expiry.dlq' WHEN l.g % 10 < 9 THEN 'reservation-expiry-eu.dlq'
	     ELSE 'billing-expiry.dlq' END,
	'reservation-expiry', 'reservations', 'reservation.expire', d.category,
	d.class, format(d.err, 'r-' || l.g), 3, d.history, d.headers, 'application/json', l.body, sha256(l.body), length(l.body),
	l.at, CASE WHEN l.r2 < 0.85 THEN 'dead' WHEN l.r2 < 0.97 THEN 'replayed' ELSE 'discarded' END
FROM letters l JOIN docs d USING (kind)`

// seedArchive fills db with n letters ending at end, then vacuums and
// analyzes so that plans and visibility are those of a settled archive, as
// autovacuum would leave one built by ingest over a month.
func seedArchive(ctx context.Context, db *benchDB, n int, end time.Time) (time.Duration, error) {
	start := time.Now()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	// One statement in its own transaction: nothing to lose if it fails, and
	// no reason to wait for a WAL flush per row.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, seedSQL, n, end); err != nil {
		return 0, fmt.Errorf("seed %d letters: %w", n, err)
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) expiryctl.dead_letters, expiryctl.dead_letter_tallies"); err != nil {
		return 0, fmt.Errorf("vacuum: %w", err)
	}
	return time.Since(start), nil
}
