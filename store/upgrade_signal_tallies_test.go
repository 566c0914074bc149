package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestUpgradeToSignalTalliesCountsTheArchive migrates an archive of 00011
// to today's schema: migration 00012 counts the letters already archived
// into its tallies, and its triggers count the ones captured after.
func TestUpgradeToSignalTalliesCountsTheArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 11); err != nil {
		t.Fatal(err)
	}
	// Two letters without a deadline, as binaries of before 00010 stored
	// them, and two due an hour ago, as a second client could store them.
	for i, key := range []string{"expire:r-1:v1", "expire:r-2:v1"} {
		if _, err := db.Pool.Exec(ctx, oldIngest, []byte{byte(i)}, key); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range []string{"expire:r-3:v1", "expire:r-4:v1"} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
				error_class, attempts, payload, payload_sha256, payload_size, dead_lettered_at, due_at)
			VALUES (sha256($1), $2, 'q.dlq', 'transient-exhausted', 'db_timeout', 3, $1, sha256($1), length($1), now(),
				now() - interval '1 hour')`, []byte{byte(10 + i)}, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letters SET status = 'replayed' WHERE job_key = 'expire:r-4:v1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, oldIngest, []byte{9}, "expire:r-9:v1"); err != nil {
		t.Fatal(err)
	}
	var waiting, replayed int64
	err := db.Pool.QueryRow(ctx, `SELECT
			coalesce(sum(letters) FILTER (WHERE status = 'dead'), 0)::bigint,
			coalesce(sum(letters) FILTER (WHERE status = 'replayed'), 0)::bigint
		FROM expiryctl.dead_letter_class_tallies
		WHERE reason_category = 'transient-exhausted' AND error_class = 'db_timeout' AND attempts = 3`).Scan(&waiting, &replayed)
	if err != nil {
		t.Fatal(err)
	}
	if waiting != 4 || replayed != 1 {
		t.Errorf("class tallies: %d dead, %d replayed; want 4 (three from before the upgrade, one after) and 1", waiting, replayed)
	}
	// Only the waiting letter with a deadline is in the due tallies.
	var due int64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(letters), 0)::bigint FROM expiryctl.dead_letter_due_tallies`).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if due != 1 {
		t.Errorf("%d letters in the due tallies, want 1: the waiting one with a due_at", due)
	}
}

// TestUpgradeSplitsDueTalliesByCategory migrates an archive of 00032 to
// today's schema: migration 00033 counts its waiting letters with a
// deadline again, per hour and category, and the trigger counts the ones
// captured after it the same way.
func TestUpgradeSplitsDueTalliesByCategory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 32); err != nil {
		t.Fatal(err)
	}
	insert := func(i int, category string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
				error_class, attempts, payload, payload_sha256, payload_size, dead_lettered_at, due_at)
			VALUES (sha256($1), $2, 'q.dlq', $3, 'x', 1, $1, sha256($1), length($1), now(),
				date_trunc('hour', now()) - interval '2 hours')`, []byte{byte(i)}, fmt.Sprintf("expire:r-%d:v1", i), category); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, "transient-exhausted")
	insert(2, "transient-exhausted")
	insert(3, "conflict")
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	insert(4, "conflict")
	var got string
	if err := db.Pool.QueryRow(ctx, `SELECT string_agg(reason_category || '=' || letters, ',' ORDER BY reason_category)
		FROM expiryctl.dead_letter_due_tallies`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "conflict=2,transient-exhausted=2" {
		t.Errorf("due tallies %s, want conflict=2,transient-exhausted=2 (three from before the upgrade, one after)", got)
	}
}
