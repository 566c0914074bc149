// Package audittest seeds large, validly chained audit trails quickly, for
// the audit package's tests and the benchmark.
package audittest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
)

// SeedChain appends n chained rows after the trail's current head with
// COPY, the chain trigger disabled for the copy, so that a million rows take
// seconds rather than the minutes the row-by-row trigger needs. row gives the
// fields of each seq (its Seq and PrevHash are filled in here); Details must
// be in jsonb's own text form, or PostgreSQL would hash the row differently.
// SeedChain leaves audit_head at the new last row, as the trigger would, and
// checks the first rows against PostgreSQL's expiryctl.audit_canonical.
func SeedChain(ctx context.Context, pool *pgxpool.Pool, n int64, row func(seq int64) audit.ChainFields) (audit.Anchor, error) {
	var head audit.Anchor
	var headHash []byte
	err := pool.QueryRow(ctx, `SELECT seq, hash FROM expiryctl.audit_head`).Scan(&head.Seq, &headHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return head, err
	}
	copy(head.Hash[:], headHash)
	first := head.Seq + 1
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_chain`); err != nil {
			return err
		}
		prev := head.Hash
		seq := first - 1
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if seq == first-1+n {
				return nil, nil
			}
			seq++
			f := row(seq)
			f.Seq, f.PrevHash = seq, prev
			h := f.ComputeHash()
			prev = h
			return []any{seq, time.UnixMicro(f.AtMicros), f.Actor, f.DBRole, f.Action, f.Target, f.Details, f.Outcome,
				f.PrevHash[:], h[:]}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"expiryctl", "audit_log"},
			[]string{"seq", "at", "actor", "db_role", "action", "target", "details", "outcome", "prev_hash", "hash"}, src); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_chain`); err != nil {
			return err
		}
		head = audit.Anchor{Seq: seq, Hash: prev}
		_, err := tx.Exec(ctx, `INSERT INTO expiryctl.audit_head (singleton, seq, hash) VALUES (true, $1, $2)
			ON CONFLICT (singleton) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, head.Seq, head.Hash[:])
		return err
	})
	if err != nil {
		return head, fmt.Errorf("seed %d audit rows: %w", n, err)
	}
	var bad int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE seq BETWEEN $1 AND $1 + 999
		AND hash <> sha256(expiryctl.audit_canonical(seq, at, actor, db_role, action, target, details, outcome, prev_hash))`,
		first).Scan(&bad); err != nil {
		return head, err
	}
	if bad != 0 {
		return head, fmt.Errorf("seed: %d seeded rows hash differently in PostgreSQL: their details are not in jsonb's text form", bad)
	}
	return head, nil
}
