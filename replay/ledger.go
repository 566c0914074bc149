package replay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/store"
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
	t := onPostgres(q)
	entries, err := t.RequestLedger(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*LedgerEntry, len(entries))
	for i := range entries {
		byID[entries[i].ID] = &entries[i]
	}
	err = t.ItemsDecided(ctx, func(request, letter int64, state string) {
		if e := byID[request]; e != nil {
			e.Outcomes[letter] = state
		}
	})
	return entries, err
}

// PolicyDocument returns the policy row as jsonb renders it, the form the
// policy events record as "after".
func PolicyDocument(ctx context.Context, q store.Querier) (map[string]any, error) {
	doc, err := onPostgres(q).PolicyDocument(ctx)
	if err != nil {
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
	doc, err := onPostgres(tx).PolicyDefaults(ctx)
	if err != nil {
		return nil, fmt.Errorf("compute the policy's defaults: %w", err)
	}
	return doc, nil
}
