package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestMigrationConvergesTheEarlyReplaySchema builds a database as the first
// shipped migrations 00001-00003 left it (after today's 00004-00006): no
// statement trigger guarding item states, two extra indexes, no fillfactor.
// Migrating brings it to today's schema (the fillfactor 00040 sets), and an item of a pending request
// can no longer move.
func TestMigrationConvergesTheEarlyReplaySchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 6); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`DROP TRIGGER replay_items_state_guard ON expiryctl.replay_items`,
		`CREATE INDEX replay_items_state ON expiryctl.replay_items (request_id, state, ordinal)`,
		`CREATE INDEX dead_letters_reservation ON expiryctl.dead_letters (reservation_id)`,
		`ALTER TABLE expiryctl.replay_items RESET (fillfactor)`,
	} {
		if _, err := db.Pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}

	var triggers, extraIndexes int
	var options []string
	err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_trigger WHERE tgrelid = 'expiryctl.replay_items'::regclass AND tgname = 'replay_items_state_guard'),
		(SELECT count(*) FROM pg_class WHERE relname IN ('replay_items_state', 'dead_letters_reservation')),
		(SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'expiryctl.replay_items'::regclass)`).Scan(&triggers, &extraIndexes, &options)
	if err != nil {
		t.Fatal(err)
	}
	if triggers != 1 || extraIndexes != 0 || len(options) != 1 || options[0] != "fillfactor=50" {
		t.Errorf("after migrating: %d state guard triggers, %d extra indexes, options %v; want 1, 0, [fillfactor=50]", triggers, extraIndexes, options)
	}

	var request int64
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var letter int64
		if err := tx.QueryRow(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, source_queue, reason_category,
				payload, payload_sha256, payload_size, dead_lettered_at)
			VALUES ('\x01', 'q.dlq', 'unknown', '\x7b7d', '\x02', 2, now()) RETURNING id`).Scan(&letter); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO expiryctl.replay_requests (kind, item_count, cohort_hash, rate,
				stop_failure_ratio, stop_queue_depth, stop_redead_ratio, canary_window, why, requested_by, expires_at)
			VALUES ('replay', 1, '\x03', 1, 0.1, 100, 0.1, '1 minute', 'test', 'alice', now() + interval '1 hour')
			RETURNING id`).Scan(&request); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, ordinal, payload_sha256)
			VALUES ($1, $2, 0, '\x02')`, request, letter)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// publishing, not confirmed: pending -> confirmed is refused sooner, by
	// the item state machine of 00008, whatever the request's status.
	_, err = db.Pool.Exec(ctx, `UPDATE expiryctl.replay_items SET state = 'publishing' WHERE request_id = $1`, request)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "EG001" || pgErr.Detail != "rule: approved-to-run" {
		t.Errorf("moving an item of a pending request: %v; want refused by rule approved-to-run", err)
	}
}
