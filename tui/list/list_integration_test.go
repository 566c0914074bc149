package list_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
	"github.com/expiryctl/expiryctl/tui/list"
)

// seedLetter is letter n of the integration archive. Every third letter
// shares its dead_lettered_at with the one before, so that the keyset has
// to break ties by id.
func seedLetter(n int) deadletter.Letter {
	at := fakes.Epoch.Add(-time.Duration(10000-n+n%3/2) * time.Second)
	body := fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":3}`, n)
	queue := "reservation-expiry.dlq"
	if n%4 == 0 {
		queue = "reservation-expiry-eu.dlq"
	}
	return deadletter.Letter{
		Fingerprint: sha256.Sum256(fmt.Appendf(nil, "tui-letter-%d", n)), JobKey: fmt.Sprintf("expire:r-%d:v3", n),
		MessageID: fmt.Sprintf("expire:r-%d:v3", n), ReservationID: fmt.Sprintf("r-%d", n),
		IdempotencyKey: fmt.Sprintf("expire:r-%d:v3", n), SourceQueue: queue,
		OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
		Category: deadletter.TransientExhausted, ErrorClass: "db_timeout", LastError: "timeout \x1b[2J", Attempts: 3,
		Headers: deadletter.EncodeHeaders(map[string]any{"x-error-class": "db_timeout"}), ContentType: "application/json",
		Payload: body, PayloadHash: sha256.Sum256(body), DeadLetteredAt: at,
	}
}

// TestPagesByKeysetAgainstPostgres scrolls the list through a real archive
// with the cursor, as a user would, and checks that every letter is shown
// exactly once in the archive's order, that pages come from the database
// as the cursor nears the end of what is loaded, and that memory holds at
// most a few pages.
func TestPagesByKeysetAgainstPostgres(t *testing.T) {
	t.Parallel()
	const n = 1234
	db := pgtest.New(t)
	ctx := context.Background()
	letters := make([]deadletter.Letter, n)
	for i := range letters {
		letters[i] = seedLetter(i + 1)
	}
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := deadletter.Insert(ctx, tx, letters)
		return err
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	var want []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM expiryctl.dead_letters ORDER BY dead_lettered_at DESC, id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}

	svc := backend.Services{Archive: deadletter.NewArchive(db.Pool, "tui-integration"),
		Requests: &replay.Service{Pool: db.Pool, Actor: "tui-integration"}, Actor: "tui-integration", Now: fakes.Now}
	m := list.New(tuitest.Context(80, 21), svc)
	m, first := m.Activate()
	m, _ = tuitest.Drive(t, m, update, first)

	var got []int64
	for i := 0; i < n+5; i++ {
		r, ok := m.Selected()
		if !ok {
			t.Fatalf("no letter under the cursor at %d", m.Cursor())
		}
		if len(got) == 0 || got[len(got)-1] != r.ID {
			got = append(got, r.ID)
		}
		if p := m.Window().Pages(); p > list.MaxPages {
			t.Fatalf("%d pages in memory at letter %d, want at most %d", p, i, list.MaxPages)
		}
		m = press(t, m, tuitest.Key("down"))
	}
	if len(got) != n {
		t.Fatalf("visited %d letters, want %d", len(got), n)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("letter %d is %d, want %d (keyset order broken)", i, got[i], want[i])
		}
	}
	if !m.Window().Complete() {
		t.Error("the window does not know it reached the end")
	}
	lists := count(t, db, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.list' AND actor = 'tui-integration'`)
	if wantLists := (n + list.PageSize - 1) / list.PageSize; lists != wantLists {
		t.Errorf("%d pages fetched (audited dlq.list rows), want %d: one per page", lists, wantLists)
	}

	// Back up to the top: pages dropped from memory come back by keyset.
	for range n {
		m = press(t, m, tuitest.Key("up"))
	}
	if r, _ := m.Selected(); r.ID != want[0] || m.Cursor() != 0 {
		t.Errorf("back at the top the cursor is on %d (index %d), want %d", r.ID, m.Cursor(), want[0])
	}

	// A queue filter and a search run in SQL.
	m = m.SetQueues([]string{"reservation-expiry-eu.dlq"})
	m = press(t, m, tuitest.Key("w"))
	m = press(t, m, append(append(tuitest.Keys("/"), tuitest.Type("r-12")...), tuitest.Key("enter"))...)
	seen := map[string]bool{}
	for {
		r, _ := m.Selected()
		seen[r.ReservationID] = true
		if r.SourceQueue != "reservation-expiry-eu.dlq" {
			t.Fatalf("letter %d from %s in a list filtered on the eu queue", r.ID, r.SourceQueue)
		}
		before := m.Cursor()
		m = press(t, m, tuitest.Key("down"))
		if m.Cursor() == before {
			break
		}
	}
	// r-12, r-120…r-129, r-1200…r-1234 whose number is a multiple of 4.
	wantSeen := 0
	for i := 1; i <= n; i++ {
		s := fmt.Sprint(i)
		if i%4 == 0 && len(s) >= 2 && s[:2] == "12" {
			wantSeen++
		}
	}
	if len(seen) != wantSeen {
		t.Errorf("filtered list showed %d letters, want %d", len(seen), wantSeen)
	}
}

func count(t *testing.T, db *pgtest.Database, sql string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
