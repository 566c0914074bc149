package deadletter

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestWriteBatchSurvivesADeadlock: two batches holding copies of the same
// letters in opposite orders deadlock on the fingerprint index; the batch
// PostgreSQL rolls back is written again, and nothing is stored twice.
func TestWriteBatchSurvivesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	letter := func(n int) Letter {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d"}`, n)
		return Letter{Fingerprint: sha256.Sum256(body), SourceQueue: "q.dlq", Category: Unknown, Headers: []byte(`{}`),
			Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, n, 0, time.UTC)}
	}
	x, y := letter(1), letter(2)

	other, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // committed below unless the test failed
	if _, err := InsertAs(ctx, other, "other", "q.dlq", []Letter{x}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res StoreResult
	go func() {
		// Stores y, then waits for x, which the other transaction holds.
		var err error
		res, err = writeBatch(db.Pool, batch{letters: []Letter{y, x}}, IngestOptions{Actor: "ingest", Queue: "q.dlq"})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	// The other transaction now waits for y: a cycle, which PostgreSQL
	// breaks by rolling one of the two back.
	if _, err := InsertAs(ctx, other, "other", "q.dlq", []Letter{y}); err == nil {
		if err := other.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the batch that lost the deadlock was not written again: %v", err)
	}
	var stored int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters`).Scan(&stored); err != nil || stored != 2 {
		t.Errorf("%d letters stored (%v), want each once: 2 (the batch stored %+v)", stored, err, res)
	}
}

// TestInsertByANonIngesterIsARefusal: PostgreSQL refuses ingest_letters to a
// login outside expiryctl_ingester while the statement runs, after Query
// has returned; the refusal still comes back as one, naming its rule.
func TestInsertByANonIngesterIsARefusal(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	mallory := db.Login(t, "mallory", "expiryctl_operator")
	body := []byte(`{"reservation_id":"r-1"}`)
	letter := Letter{Fingerprint: sha256.Sum256(body), SourceQueue: "q.dlq", Category: Unknown, Headers: []byte(`{}`),
		Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	_, err := InsertAs(context.Background(), mallory.Pool, "mallory", "q.dlq", []Letter{letter})
	refusal, ok := errors.AsType[*store.Refusal](err)
	if !ok || refusal.Rule != "role" {
		t.Fatalf("ingest by an operator: %v (%T), want a refusal by rule role", err, err)
	}
}
