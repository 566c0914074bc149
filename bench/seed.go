package main

import (
	"context"
	"fmt"
	"time"
)

// seedSQL fills expiryctl.dead_letters with $1 letters in one statement, so
// the statement-level tally trigger runs once. The rows look like what ingest
// stores for worker dead letters: a ~200-byte JSON payload, headers in
// expiryctl's encoding, a two-entry attempt history. Letters are spread over
// the 30 days before $2 in id order, as ingest would have stored them (ids grow
// with dead_lettered_at, give or take a few seconds of jitter). Categories are
// skewed the way an incident skews them; queues and statuses are mixed.
// Fingerprints are sha256 of the series number, so they are distinct.
const seedSQL = `
INSERT INTO expiryctl.dead_letters (
	fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
	source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
	error_class, last_error, attempts, attempt_history, headers, content_type, payload,
	payload_sha256, payload_size, dead_lettered_at, status)
SELECT sha256(convert_to('bench-letter-' || g, 'UTF8')),
	'expire:r-' || g || ':v3', 'expire:r-' || g || ':v3', 'r-' || g, 'expire:r-' || g || ':v3', 3,
	at - interval '7 minutes',
	queue, 'reservation-expiry', 'reservations', 'reservation.expire', category,
	class, err, 3,
	jsonb_build_array(
		jsonb_build_object('at', at - interval '40 seconds', 'source', 'worker', 'error_class', class, 'error', err),
		jsonb_build_object('at', at, 'source', 'worker', 'error_class', class, 'error', err)),
	jsonb_build_object(
		'x-error-class', class, 'x-last-error', err,
		'x-original-exchange', 'reservations', 'x-original-routing-key', 'reservation.expire',
		'x-attempt-history', jsonb_build_array(
			jsonb_build_object('at', jsonb_build_object('$time', at - interval '40 seconds'), 'error_class', class, 'error', err),
			jsonb_build_object('at', jsonb_build_object('$time', at), 'error_class', class, 'error', err))),
	'application/json', body, sha256(body), length(body), at, status
FROM (
	SELECT g, at, body,
		CASE WHEN g % 10 < 7 THEN 'reservation-expiry.dlq'
		     WHEN g % 10 < 9 THEN 'reservation-expiry-eu.dlq'
		     ELSE 'billing-expiry.dlq' END AS queue,
		CASE WHEN r1 < 0.40 THEN 'transient-exhausted' WHEN r1 < 0.55 THEN 'validation'
		     WHEN r1 < 0.67 THEN 'not-found' WHEN r1 < 0.77 THEN 'conflict'
		     WHEN r1 < 0.82 THEN 'malformed' WHEN r1 < 0.92 THEN 'broker-expired'
		     WHEN r1 < 0.97 THEN 'broker-limit' ELSE 'unknown' END AS category,
		CASE WHEN r1 < 0.25 THEN 'db_timeout' WHEN r1 < 0.40 THEN 'throttled'
		     WHEN r1 < 0.55 THEN 'validation' WHEN r1 < 0.67 THEN 'not_found'
		     WHEN r1 < 0.77 THEN 'version_conflict' WHEN r1 >= 0.97 THEN 'cosmic_ray' END AS class,
		CASE WHEN r1 < 0.25 THEN 'expire reservation r-' || g || ': timeout: context deadline exceeded (SQLSTATE 57014) after 5s'
		     WHEN r1 < 0.40 THEN 'expire reservation r-' || g || ': 429 Too Many Requests from inventory-service'
		     WHEN r1 < 0.55 THEN 'hold_until is before created_at for reservation r-' || g
		     WHEN r1 < 0.67 THEN 'reservation r-' || g || ' not found'
		     WHEN r1 < 0.77 THEN 'reservation r-' || g || ' is at version 4, job expected 3'
		     WHEN r1 >= 0.97 THEN 'unexpected: ' || md5(g::text) END AS err,
		CASE WHEN r2 < 0.85 THEN 'dead' WHEN r2 < 0.97 THEN 'replayed' ELSE 'discarded' END AS status
	FROM (
		SELECT g, random() AS r1, random() AS r2,
			$2::timestamptz - interval '30 days' * (($1 - g)::float8 / $1) - interval '3 seconds' * random() AS at,
			convert_to(format('{"reservation_id":"r-%s","expected_version":3,"hold_until":"2026-11-30T12:20:00Z",'
				'"idempotency_key":"expire:r-%s:v3","attempt":3,"tenant":"acme-eu-1","hold_id":"h-%s","not_before":null}',
				g, g, md5(g::text)), 'UTF8') AS body
		FROM generate_series(1, $1::bigint) AS g
	) AS raw
) AS s`

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
