package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo applies the embedded migrations up to and including version, so
// that tests can build a database as an older expiryctl left it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	provider, closeDB, err := openProvider(ctx, pool)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}
