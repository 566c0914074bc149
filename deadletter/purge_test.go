package deadletter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// capturedWhenDead sets each seeded letter's capture time to the time it
// says it died, as a capture that kept up would have: retention counts
// from the capture. Seeding goes through ingest_letters, which stamps
// now(); only a superuser can move the stamp, past the immutability
// trigger.
func capturedWhenDead(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`ALTER TABLE expiryctl.dead_letters DISABLE TRIGGER dead_letters_immutable`,
			`UPDATE expiryctl.dead_letters SET ingested_at = dead_lettered_at`,
			`ALTER TABLE expiryctl.dead_letters ENABLE TRIGGER dead_letters_immutable`,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPurgeRedactsOnlyOldLettersAndKeepsIdentity(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	now := time.Now().UTC()
	var letters []deadletter.Letter
	for i := range 30 {
		l := seedLetter(i, deadletter.Validation, "q.dlq")
		// Twenty old letters, ten recent.
		l.DeadLetteredAt = now.Add(-100 * 24 * time.Hour)
		if i >= 20 {
			l.DeadLetteredAt = now.Add(-time.Hour)
		}
		letters = append(letters, l)
	}
	seed(t, db.Pool, letters...)
	capturedWhenDead(t, db.Pool)
	// One old letter is held by an open request: a frozen cohort cannot lose
	// a payload, so the purge voids the request and then redacts the letter.
	var request int64
	if err := db.Pool.QueryRow(ctx, `SELECT request_id FROM expiryctl.replay_request_create('ops', 'discard',
			jsonb_build_object('ids', ARRAY(SELECT id FROM expiryctl.dead_letters WHERE reservation_id = 'r-0')),
			NULL, NULL, '', '', 'old news', false, false)`).Scan(&request); err != nil {
		t.Fatal(err)
	}

	preview, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if preview.Redacted != 20 || preview.InRequest != 1 {
		t.Fatalf("dry run = %+v, want 20 to redact, 1 of them held by a request", preview)
	}
	var redacted int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE redacted_at IS NOT NULL`).Scan(&redacted); err != nil || redacted != 0 {
		t.Fatalf("a dry run redacted %d letters (%v)", redacted, err)
	}

	res, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redacted != 20 {
		t.Fatalf("purge redacted %d, want 20", res.Redacted)
	}
	var status string
	var voided int
	if err := db.Pool.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.cancel'
			AND target = 'replay_request:' || $1::bigint AND details->>'why' LIKE 'voided by dlq purge%')
		FROM expiryctl.replay_requests WHERE id = $1`, request).Scan(&status, &voided); err != nil || status != "cancelled" || voided != 1 {
		t.Fatalf("the request holding an old letter is %s with %d void audit rows (%v), want cancelled and 1", status, voided, err)
	}
	var emptied, kept, batches int
	err = db.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE redacted_at IS NOT NULL AND payload = '' AND headers = '{}'
		                 AND reservation_id IS NOT NULL AND payload_sha256 IS NOT NULL AND payload_size > 0 AND reason_category = 'validation'),
		count(*) FILTER (WHERE redacted_at IS NULL AND length(payload) > 0),
		(SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.purge.batch')
		FROM expiryctl.dead_letters`).Scan(&emptied, &kept, &batches)
	if err != nil {
		t.Fatal(err)
	}
	if emptied != 20 || kept != 10 || batches != 3 {
		t.Fatalf("%d redacted with identity kept, %d untouched, %d batch audit rows; want 20, 10, 3", emptied, kept, batches)
	}
	// Running it again finds nothing left.
	again, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour})
	if err != nil || again.Redacted != 0 {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
}

// A pass skips letters another transaction holds locked rather than wait
// for them; the purge goes back for them once they are free, and gives up,
// saying so, on letters that stay locked.
func TestPurgeGoesBackForLettersThatWereLocked(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	old := time.Now().UTC().Add(-100 * 24 * time.Hour)
	var letters []deadletter.Letter
	for i := range 6 {
		l := seedLetter(i, deadletter.Validation, "q.dlq")
		l.DeadLetteredAt = old
		letters = append(letters, l)
	}
	seed(t, db.Pool, letters...)
	capturedWhenDead(t, db.Pool)
	lockLowest := func(n int) pgx.Tx {
		t.Helper()
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT id FROM expiryctl.dead_letters ORDER BY id LIMIT $1 FOR UPDATE`, n); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	redacted := func() int {
		t.Helper()
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE redacted_at IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The two lowest are locked while the first batch runs, and freed once
	// it has redacted the next two.
	held := lockLowest(2)
	res, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, Batch: 2,
		Progress: func(deadletter.PurgeResult) {
			if held != nil {
				_ = held.Rollback(ctx)
				held = nil
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redacted != 6 || redacted() != 6 {
		t.Fatalf("purge said %d redacted and %d are, want all 6: the locked ones were left behind", res.Redacted, redacted())
	}

	// Letters that stay locked are reported, not silently left.
	more := make([]deadletter.Letter, 0, 3)
	for i := 6; i < 9; i++ {
		l := seedLetter(i, deadletter.Validation, "q.dlq")
		l.DeadLetteredAt = old
		more = append(more, l)
	}
	seed(t, db.Pool, more...)
	capturedWhenDead(t, db.Pool)
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT id FROM expiryctl.dead_letters WHERE redacted_at IS NULL FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	_, err = deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, Batch: 2})
	if err == nil || !strings.Contains(err.Error(), "3 letters past retention stayed locked") {
		t.Fatalf("purge of letters locked throughout returned %v, want it to say 3 stayed locked", err)
	}
	var failed int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.purge' AND outcome = 'error'`).Scan(&failed); err != nil || failed != 1 {
		t.Fatalf("%d failed purge audit rows (%v), want 1", failed, err)
	}
}
