package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/pgtest"
)

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
	// One old letter is held by an open request: redacting it would change a
	// frozen cohort.
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letters SET status = 'in_request' WHERE reservation_id = 'r-0'`); err != nil {
		t.Fatal(err)
	}

	preview, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if preview.Redacted != 19 || preview.InRequest != 1 {
		t.Fatalf("dry run = %+v, want 19 to redact and 1 kept", preview)
	}
	var redacted int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE redacted_at IS NOT NULL`).Scan(&redacted); err != nil || redacted != 0 {
		t.Fatalf("a dry run redacted %d letters (%v)", redacted, err)
	}

	res, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redacted != 19 {
		t.Fatalf("purge redacted %d, want 19", res.Redacted)
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
	if emptied != 19 || kept != 11 || batches != 3 {
		t.Fatalf("%d redacted with identity kept, %d untouched, %d batch audit rows; want 19, 11, 3", emptied, kept, batches)
	}
	// Running it again finds nothing left.
	again, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: 90 * 24 * time.Hour})
	if err != nil || again.Redacted != 0 {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
}
