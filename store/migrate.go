package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable records which migrations goose applied.
const versionTable = Schema + ".schema_version"

// migrationLockID is the advisory lock that serialises `expiryctl migrate` runs
// across hosts ("expiryctl" in ASCII, truncated to 63 bits).
const migrationLockID int64 = 0x6578706972796374

// ErrSchemaMissing means the database has no expiryctl schema yet.
var ErrSchemaMissing = errors.New("the expiryctl schema is missing: run `expiryctl migrate`")

// SchemaOutdatedError means the database is behind (or ahead of) this binary.
type SchemaOutdatedError struct {
	Have, Want int64
}

func (e *SchemaOutdatedError) Error() string {
	if e.Have > e.Want {
		return fmt.Sprintf("the database schema is at version %d, newer than this expiryctl (%d): upgrade expiryctl", e.Have, e.Want)
	}
	return fmt.Sprintf("the database schema is at version %d but this expiryctl needs %d: run `expiryctl migrate`", e.Have, e.Want)
}

// MigrationResult says what one Migrate call changed.
type MigrationResult struct {
	Applied []int64
	Version int64
	// Database, Server and Login say which database was migrated: its
	// name, the server's host:port, and the login that migrated it.
	Database, Server, Login string
}

// Migrate applies every embedded migration that the database at pool lacks.
// It is idempotent, and concurrent calls from several hosts are serialised by
// a PostgreSQL advisory lock, so running it twice or from two places at once is
// safe.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (MigrationResult, error) {
	provider, closeDB, err := openProvider(ctx, pool)
	if err != nil {
		return MigrationResult{}, err
	}
	defer closeDB()
	results, err := provider.Up(ctx)
	if err != nil {
		return MigrationResult{}, fmt.Errorf("migrate: %w", err)
	}
	var res MigrationResult
	cfg := pool.Config().ConnConfig
	res.Server = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if err := pool.QueryRow(ctx, `SELECT current_database(), session_user`).Scan(&res.Database, &res.Login); err != nil {
		return res, fmt.Errorf("migrate: read the database's name: %w", err)
	}
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Version)
	}
	res.Version, err = provider.GetDBVersion(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: read version: %w", err)
	}
	return res, nil
}

func createSchema(ctx context.Context, pool *pgxpool.Pool) error {
	// Two hosts may race on CREATE SCHEMA IF NOT EXISTS; the loser's duplicate
	// error means the schema is there, which is all that is wanted.
	_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P06" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate: create schema %s: %w", Schema, err)
	}
	return nil
}

// openProvider creates the schema if need be and returns a goose provider
// over pool, with the function that releases it.
func openProvider(ctx context.Context, pool *pgxpool.Pool) (*goose.Provider, func(), error) {
	if err := createSchema(ctx, pool); err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	provider, err := newProvider(db)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return provider, func() { _ = db.Close() }, nil
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, err
	}
	versionStore, err := database.NewStore(database.DialectPostgres, versionTable)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider("", db, sub, goose.WithStore(versionStore), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
}

// LatestVersion is the newest migration embedded in this binary.
func LatestVersion() int64 {
	entries, _ := fs.Glob(migrationFiles, "migrations/*.sql")
	var latest int64
	for _, name := range entries {
		var v int64
		if _, err := fmt.Sscanf(name[len("migrations/"):], "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// CheckSchema returns nil when the database's schema is exactly the version
// this binary was built for, ErrSchemaMissing when it has none, and a
// *SchemaOutdatedError otherwise. It costs one query.
func CheckSchema(ctx context.Context, q Querier) error {
	var have *int64
	err := q.QueryRow(ctx, `SELECT CASE WHEN to_regclass($1) IS NULL THEN NULL
		ELSE (SELECT max(version_id) FROM `+versionTable+` WHERE is_applied) END`, versionTable).Scan(&have)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return ErrSchemaMissing
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrSchemaMissing
		}
		return fmt.Errorf("check schema: %w", err)
	}
	if have == nil {
		return ErrSchemaMissing
	}
	if want := LatestVersion(); *have != want {
		return &SchemaOutdatedError{Have: *have, Want: want}
	}
	return nil
}

// MigrationsDigest is a hex sha256 over the embedded migration files, so that
// a test template built from edited migrations is not mistaken for a current one.
func MigrationsDigest() string {
	h := sha256.New()
	entries, _ := fs.Glob(migrationFiles, "migrations/*.sql")
	for _, name := range entries {
		b, _ := migrationFiles.ReadFile(name)
		h.Write([]byte(name))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
