package servicetest_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service/servicetest"
)

func TestArchiveContractPostgres(t *testing.T) {
	t.Parallel()
	servicetest.Archive(t, func(t *testing.T) servicetest.ArchiveWorld {
		db := pgtest.New(t)
		var now time.Time
		if err := db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		now = now.UTC()
		return servicetest.ArchiveWorld{
			Now: now,
			Seed: func(specs ...servicetest.LetterSpec) (servicetest.OldestArchive, []int64) {
				ids := seedArchive(t, db, now, specs)
				alice := db.Login(t, "alice", "expiryctl_operator")
				return deadletter.NewArchive(alice.Pool, "alice"), ids
			},
		}
	})
}

// seedArchive captures a letter per spec, as the owner, in one batch (ids
// in the specs' order), then moves each to its spec's status as a replay
// or a discard would, and returns their ids.
func seedArchive(t *testing.T, db *pgtest.Database, now time.Time, specs []servicetest.LetterSpec) []int64 {
	t.Helper()
	ctx := context.Background()
	letters := make([]deadletter.Letter, len(specs))
	for i, s := range specs {
		body := fmt.Appendf(nil, `{"reservation_id":%q,"expected_version":3}`, s.ReservationID)
		var due *time.Time
		if !s.DueAt.IsZero() {
			due = &s.DueAt
		}
		letters[i] = deadletter.Letter{
			Fingerprint:    sha256.Sum256(fmt.Appendf(nil, "archive-contract-%d", i)),
			JobKey:         s.IdempotencyKey,
			MessageID:      s.MessageID,
			ReservationID:  s.ReservationID,
			IdempotencyKey: s.IdempotencyKey,
			DueAt:          due,
			SourceQueue:    s.Queue,
			Category:       s.Category,
			ErrorClass:     s.ErrorClass,
			LastError:      s.LastError,
			Attempts:       s.Attempts,
			Headers:        fmt.Appendf(nil, `{"x-error-class":%q}`, s.ErrorClass),
			ContentType:    "application/json",
			Payload:        body,
			PayloadHash:    sha256.Sum256(body),
			DeadLetteredAt: now.Add(-s.Age),
		}
	}
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := deadletter.Insert(ctx, tx, letters)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT id FROM expiryctl.dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(specs) {
		t.Fatalf("seeded %d letters of %d", len(ids), len(specs))
	}
	for i, s := range specs {
		if s.Status == deadletter.StatusDead {
			continue
		}
		if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letter_states SET status = $1 WHERE dead_letter_id = $2`,
			string(s.Status), ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}
