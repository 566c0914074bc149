package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestUpgradeToLetterStatesKeepsStatusesAndTallies migrates an archive of
// 00018, whose letters carry their status in dead_letters, to today's
// schema: migration 00019 copies each status into dead_letter_states, the
// tallies it finds stay as they were, and from then on a status that moves
// and a letter that arrives are counted from the state rows.
func TestUpgradeToLetterStatesKeepsStatusesAndTallies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 18); err != nil {
		t.Fatal(err)
	}
	for i, status := range []string{"dead", "dead", "in_request", "replayed", "discarded"} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
				error_class, attempts, payload, payload_sha256, payload_size, dead_lettered_at, due_at, status)
			VALUES (sha256($1), 'expire:r-' || $2::int || ':v1', 'q.dlq', 'transient-exhausted', 'db_timeout', 3, $1, sha256($1),
				length($1), now(), now() - interval '1 hour', $3)`, []byte{byte(i)}, i, status); err != nil {
			t.Fatal(err)
		}
	}
	before := tallySnapshot(t, db)
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	if err := db.Pool.QueryRow(ctx, `SELECT array_agg(s.status ORDER BY d.id)
		FROM expiryctl.dead_letters d JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id`).Scan(&statuses); err != nil {
		t.Fatal(err)
	}
	if want := []string{"dead", "dead", "in_request", "replayed", "discarded"}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses after the upgrade: %v, want %v", statuses, want)
	}
	if after := tallySnapshot(t, db); after != before {
		t.Errorf("the upgrade changed the tallies:\nbefore %s\nafter  %s", before, after)
	}

	// A waiting letter replayed, and one captured after the upgrade.
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letter_states SET status = 'replayed'
		WHERE dead_letter_id = (SELECT min(id) FROM expiryctl.dead_letters)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
			error_class, attempts, payload, payload_sha256, payload_size, dead_lettered_at, due_at)
		VALUES (sha256('\x09'), 'expire:r-9:v1', 'q.dlq', 'transient-exhausted', 'db_timeout', 3, '\x09', sha256('\x09'), 1,
			now(), now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	var dead, replayed, waitingDue, inTallies int64
	if err := db.Pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(letters) FILTER (WHERE status = 'dead'), 0)::bigint FROM expiryctl.dead_letter_class_tallies),
			(SELECT coalesce(sum(letters) FILTER (WHERE status = 'replayed'), 0)::bigint FROM expiryctl.dead_letter_tallies),
			(SELECT coalesce(sum(letters), 0)::bigint FROM expiryctl.dead_letter_due_tallies),
			(SELECT coalesce(sum(letters), 0)::bigint FROM expiryctl.dead_letter_arrival_tallies)`).
		Scan(&dead, &replayed, &waitingDue, &inTallies); err != nil {
		t.Fatal(err)
	}
	// dead: one of the two left, and the new one; waiting with a deadline:
	// those two and the one in a request.
	if dead != 2 || replayed != 2 || waitingDue != 3 || inTallies != 6 {
		t.Errorf("after a replay and a capture: %d dead, %d replayed, %d waiting with a deadline, %d arrived; want 2, 2, 3 and 6",
			dead, replayed, waitingDue, inTallies)
	}
}

// tallySnapshot is every tally row, as one text, for comparing two moments.
func tallySnapshot(t *testing.T, db *pgtest.Database) string {
	t.Helper()
	var s string
	if err := db.Pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(r::text, ';' ORDER BY r::text) FROM expiryctl.dead_letter_tallies r),
		(SELECT string_agg(r::text, ';' ORDER BY r::text) FROM expiryctl.dead_letter_class_tallies r),
		-- Per hour: 00033 splits each hour's count by category.
		(SELECT string_agg(r::text, ';' ORDER BY r::text) FROM (SELECT due_hour, sum(letters)
			FROM expiryctl.dead_letter_due_tallies GROUP BY due_hour) r),
		(SELECT string_agg(r::text, ';' ORDER BY r::text) FROM expiryctl.dead_letter_arrival_tallies r))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
