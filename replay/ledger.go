package replay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// LedgerEntry is a request as its tables hold it, for comparing with the
// events of the trail: its status and reviewer, how many of its items are
// in each state, and which letters it holds confirmed, skipped or failed.
type LedgerEntry struct {
	ID             int64
	Kind           Kind
	Status         Status
	ReviewedDBRole string
	States         map[string]int
	// Outcomes maps each decided item's dead letter id to its state.
	Outcomes map[int64]string
}

// Ledger returns every request with its items' states, oldest first.
func Ledger(ctx context.Context, q store.Querier) ([]LedgerEntry, error) {
	rows, err := q.Query(ctx, `SELECT r.id, r.kind, r.status, coalesce(r.reviewed_db_role, ''),
		       coalesce((SELECT jsonb_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items
		                 WHERE request_id = r.id GROUP BY state) s), '{}')
		FROM expiryctl.replay_requests r ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("read the replay requests: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LedgerEntry, error) {
		e := LedgerEntry{Outcomes: map[int64]string{}}
		err := row.Scan(&e.ID, &e.Kind, &e.Status, &e.ReviewedDBRole, &e.States)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the replay requests: %w", err)
	}
	byID := make(map[int64]*LedgerEntry, len(entries))
	for i := range entries {
		byID[entries[i].ID] = &entries[i]
	}
	rows, err = q.Query(ctx, `SELECT request_id, dead_letter_id, state FROM expiryctl.replay_items
		WHERE state IN ('confirmed', 'skipped', 'failed')`)
	if err != nil {
		return nil, fmt.Errorf("read the replay items: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var req, letter int64
		var state string
		if err := rows.Scan(&req, &letter, &state); err != nil {
			return nil, fmt.Errorf("read the replay items: %w", err)
		}
		if e := byID[req]; e != nil {
			e.Outcomes[letter] = state
		}
	}
	return entries, rows.Err()
}

// PolicyDocument returns the policy row as jsonb renders it, the form the
// policy events record as "after".
func PolicyDocument(ctx context.Context, q store.Querier) (map[string]any, error) {
	var doc map[string]any
	if err := q.QueryRow(ctx, `SELECT to_jsonb(p) - 'singleton' FROM expiryctl.policy p WHERE singleton`).Scan(&doc); err != nil {
		return nil, fmt.Errorf("read the policy: %w", err)
	}
	return doc, nil
}

// PolicyDefaults returns the policy a fresh schema has, from the table's
// column defaults, without writing anything that lasts: the row is built in
// a temporary table of a transaction that is rolled back.
func PolicyDefaults(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) (map[string]any, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing is kept
	var doc map[string]any
	for _, sql := range []string{
		`CREATE TEMP TABLE policy_defaults (LIKE expiryctl.policy INCLUDING DEFAULTS) ON COMMIT DROP`,
		`INSERT INTO policy_defaults DEFAULT VALUES`,
	} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("compute the policy's defaults: %w", err)
		}
	}
	if err := tx.QueryRow(ctx, `SELECT to_jsonb(p) - 'singleton' FROM policy_defaults p`).Scan(&doc); err != nil {
		return nil, fmt.Errorf("compute the policy's defaults: %w", err)
	}
	return doc, nil
}
