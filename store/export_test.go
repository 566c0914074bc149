package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
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

// Migrations steps one database up and down through the embedded
// migrations over one provider, so that a test of every version does not
// reconnect for each step.
type Migrations struct {
	provider *goose.Provider
	close    func()
}

// OpenMigrations returns the migrations of the database at pool; Close
// releases them.
func OpenMigrations(ctx context.Context, pool *pgxpool.Pool) (*Migrations, error) {
	provider, closeDB, err := openProvider(ctx, pool)
	if err != nil {
		return nil, err
	}
	return &Migrations{provider: provider, close: closeDB}, nil
}

// Versions are the embedded migrations' versions, oldest first.
func (m *Migrations) Versions() []int64 {
	var versions []int64
	for _, s := range m.provider.ListSources() {
		versions = append(versions, s.Version)
	}
	return versions
}

// UpTo applies the migrations the database lacks up to and including version.
func (m *Migrations) UpTo(ctx context.Context, version int64) error {
	if _, err := m.provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate up to %d: %w", version, err)
	}
	return nil
}

// DownTo rolls back every applied migration newer than version.
func (m *Migrations) DownTo(ctx context.Context, version int64) error {
	if _, err := m.provider.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// Close releases the connection the migrations hold.
func (m *Migrations) Close() { m.close() }
