package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// MigrateTo applies the embedded migrations up to and including version, so
// that tests can build a database as an older expiryctl left it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	if err := createSchema(ctx, pool); err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	provider, err := newProvider(db)
	if err != nil {
		return err
	}
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}
