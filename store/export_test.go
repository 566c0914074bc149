package store

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo applies the embedded migrations up to and including version, so
// that tests can build a database as an older expiryctl left it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	provider, closeDB, err := openProvider(ctx, pool, "")
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}

// DefinitionFiles are the embedded definition files, for tests that apply
// a changed copy of them.
var DefinitionFiles fs.FS = definitionFiles

// ApplyDefinitionsFrom is ApplyDefinitions over the files of fsys.
func ApplyDefinitionsFrom(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (DefinitionsResult, error) {
	return applyDefinitions(ctx, pool, fsys)
}
