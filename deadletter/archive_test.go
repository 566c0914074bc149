package deadletter_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

var baseTime = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

// seedLetter builds a stored-shape letter for job n of category c, dead-lettered
// n minutes after baseTime.
func seedLetter(n int, c deadletter.Category, queue string) deadletter.Letter {
	body := jobBody(n)
	return deadletter.Letter{
		Fingerprint:    sha256.Sum256(fmt.Appendf(nil, "%s-%d-%s", queue, n, c)),
		JobKey:         fmt.Sprintf("expire:r-%d:v3", n),
		MessageID:      fmt.Sprintf("m-%d", n),
		ReservationID:  fmt.Sprintf("r-%d", n),
		IdempotencyKey: fmt.Sprintf("expire:r-%d:v3", n),
		SourceQueue:    queue,
		Category:       c,
		ErrorClass:     "db_timeout",
		LastError:      fmt.Sprintf("timeout talking to shard %d", n%7),
		Attempts:       5,
		Headers:        []byte(`{"x-error-class":"db_timeout"}`),
		ContentType:    "application/json",
		Payload:        body,
		PayloadHash:    sha256.Sum256(body),
		DeadLetteredAt: baseTime.Add(time.Duration(n) * time.Minute),
	}
}

func seed(t *testing.T, pool *pgxpool.Pool, letters ...deadletter.Letter) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := deadletter.Insert(ctx, tx, letters)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestListPagesByKeysetNewestFirst(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var letters []deadletter.Letter
	for i := range 25 {
		c := deadletter.TransientExhausted
		if i%5 == 0 {
			c = deadletter.Validation
		}
		letters = append(letters, seedLetter(i, c, "q.dlq"))
	}
	seed(t, db.Pool, letters...)
	archive := deadletter.NewArchive(db.Pool, "alice")
	ctx := context.Background()

	var seen []int64
	var cursor *deadletter.Cursor
	for pages := 0; ; pages++ {
		page, err := archive.List(ctx, deadletter.Filter{}, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			seen = append(seen, r.ID)
		}
		if page.Next == nil {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
		// The cursor survives its text form, as it does between two commands.
		c, err := deadletter.ParseCursor(page.Next.String())
		if err != nil {
			t.Fatal(err)
		}
		cursor = &c
	}
	if len(seen) != 25 {
		t.Fatalf("listed %d letters, want 25", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Fatalf("not newest first at %d: %v", i, seen)
		}
	}

	page, err := archive.List(ctx, deadletter.Filter{Categories: []deadletter.Category{deadletter.Validation}}, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != 5 {
		t.Fatalf("validation filter returned %d, want 5", len(page.Rows))
	}
	page, err = archive.List(ctx, deadletter.Filter{Search: "R-13"}, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != 1 || page.Rows[0].ReservationID != "r-13" {
		t.Fatalf("search r-13 returned %+v", page.Rows)
	}
	page, err = archive.List(ctx, deadletter.Filter{Search: "%"}, nil, 100)
	if err != nil || len(page.Rows) != 0 {
		t.Fatalf("search for a literal %% matched %d rows (err %v): wildcards must be escaped", len(page.Rows), err)
	}
	page, err = archive.List(ctx, deadletter.Filter{Since: baseTime.Add(20 * time.Minute), Until: baseTime.Add(22 * time.Minute)}, nil, 100)
	if err != nil || len(page.Rows) != 2 {
		t.Fatalf("time window returned %d rows (err %v), want 2", len(page.Rows), err)
	}

	var streamed int
	if err := archive.Stream(ctx, deadletter.Filter{}, nil, func(deadletter.Row) error { streamed++; return nil }); err != nil {
		t.Fatal(err)
	}
	if streamed != 25 {
		t.Fatalf("streamed %d, want 25", streamed)
	}

	var audited int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.list' AND actor = 'alice' AND db_role <> ''`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 8 {
		t.Fatalf("%d dlq.list audit rows, want 8 (one per call)", audited)
	}
}

func TestSummaryFollowsStatusChanges(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	seed(t, db.Pool, seedLetter(1, deadletter.Conflict, "a.dlq"), seedLetter(2, deadletter.Conflict, "b.dlq"),
		seedLetter(3, deadletter.Malformed, "a.dlq"))
	archive := deadletter.NewArchive(db.Pool, "alice")

	summary, err := archive.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(summary) != 2 || summary[0].Category != deadletter.Conflict || summary[0].Count != 2 ||
		len(summary[0].Queues) != 2 || !summary[0].OldestDeadLetteredAt.Equal(baseTime.Add(time.Minute)) {
		t.Fatalf("summary = %+v", summary)
	}

	// The tallies follow status changes made by any client.
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letter_states SET status = 'discarded' WHERE dead_letter_id IN (SELECT id FROM expiryctl.dead_letters WHERE reservation_id = 'r-1')`); err != nil {
		t.Fatal(err)
	}
	summary, err = archive.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if summary[0].Count != 1 || summary[0].Total != 2 || !summary[0].OldestDeadLetteredAt.Equal(baseTime.Add(2*time.Minute)) ||
		len(summary[0].Queues) != 1 || summary[0].Queues[0] != "b.dlq" {
		t.Fatalf("after discard: %+v", summary[0])
	}
}

func TestShowReturnsIncarnationsAndAuditsTheView(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	first := seedLetter(9, deadletter.TransientExhausted, "q.dlq")
	second := seedLetter(9, deadletter.TransientExhausted, "q.dlq")
	second.Fingerprint = sha256.Sum256([]byte("second incarnation"))
	second.DeadLetteredAt = second.DeadLetteredAt.Add(time.Hour)
	seed(t, db.Pool, first)
	seed(t, db.Pool, second)

	archive := deadletter.NewArchive(db.Pool, "bob")
	page, err := archive.List(ctx, deadletter.Filter{}, nil, 10)
	if err != nil || len(page.Rows) != 2 {
		t.Fatalf("list: %v %d", err, len(page.Rows))
	}
	newest := page.Rows[0]
	if newest.PreviousID == nil || *newest.PreviousID != page.Rows[1].ID {
		t.Fatalf("newest incarnation previous_id = %v, want %d", newest.PreviousID, page.Rows[1].ID)
	}
	d, err := archive.Show(ctx, newest.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Incarnations) != 1 || d.Incarnations[0].ID != page.Rows[1].ID || string(d.Payload) != string(first.Payload) {
		t.Fatalf("detail = %+v", d)
	}
	if _, err := archive.Show(ctx, 999999); err == nil {
		t.Fatal("show of a missing id succeeded")
	}
	var shown, refused int
	err = db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'ok' AND target = $1),
		count(*) FILTER (WHERE outcome = 'refused' AND target = 'dead_letter:999999')
		FROM expiryctl.audit_log WHERE action = 'dlq.show' AND actor = 'bob'`, fmt.Sprintf("dead_letter:%d", newest.ID)).Scan(&shown, &refused)
	if err != nil {
		t.Fatal(err)
	}
	if shown != 1 || refused != 1 {
		t.Fatalf("audit rows: %d shown, %d refused; want 1 and 1", shown, refused)
	}
}
