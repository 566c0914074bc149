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

// SeedChain appends n chained rows after the trail's last row with COPY, so
// that a million rows take seconds. row gives the fields of each seq (its Seq
// and PrevHash are filled in here); Details must be in jsonb's own text form,
// or PostgreSQL would hash the row differently. PostgreSQL computes each
// row's hash (a generated column); SeedChain checks that it agrees with the
// hash computed here, which the next row links to.
func SeedChain(ctx context.Context, pool *pgxpool.Pool, n int64, row func(seq int64) audit.ChainFields) (audit.Anchor, error) {
	var head audit.Anchor
	var headHash []byte
	err := pool.QueryRow(ctx, `SELECT seq, hash FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1`).Scan(&head.Seq, &headHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return head, err
	}
	copy(head.Hash[:], headHash)
	first := head.Seq + 1
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Seeded rows carry made-up times and roles, which the trigger
		// refuses from any client.
		if _, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_who_and_when`); err != nil {
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
			values := []any{seq, time.UnixMicro(f.AtMicros), f.Actor, f.DBRole, f.Action, f.Target, f.Details, f.Outcome, f.PrevHash[:]}
			prev = f.ComputeHash()
			return values, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"expiryctl", "audit_log"},
			[]string{"seq", "at", "actor", "db_role", "action", "target", "details", "outcome", "prev_hash"}, src); err != nil {
			return err
		}
		head = audit.Anchor{Seq: seq, Hash: prev}
		_, err := tx.Exec(ctx, `ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_who_and_when`)
		return err
	})
	if err != nil {
		return head, fmt.Errorf("seed %d audit rows: %w", n, err)
	}
	// A row PostgreSQL hashed differently breaks the link to the next one.
	var bad int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log a
		LEFT JOIN expiryctl.audit_log b ON b.seq = a.seq + 1
		WHERE a.seq BETWEEN $1 AND least($1 + 999, $2)
		  AND a.hash <> CASE WHEN a.seq = $2 THEN $3 ELSE b.prev_hash END`,
		first, head.Seq, head.Hash[:]).Scan(&bad); err != nil {
		return head, err
	}
	if bad != 0 {
		return head, fmt.Errorf("seed: %d seeded rows hash differently in PostgreSQL: their details are not in jsonb's text form", bad)
	}
	return head, nil
}
