package store

import (
	"context"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// definitionsVersion is the migration that moved the functions into
// definition files: a database at it or above runs some release's files.
const definitionsVersion = 21

// Migration is one numbered migration: its version and its file's name.
type Migration struct {
	Version int64
	Name    string
}

// DowngradeResult says what one MigrateDown undid.
type DowngradeResult struct {
	// Undone are the migrations whose Down sections ran, newest first;
	// Version is the schema's version after them.
	Undone  []Migration
	Version int64
	// Database, Server and Login say which database went down, as in
	// MigrationResult.
	Database, Server, Login string
}

// FunctionsLeftOver says whether the database, at Version, still runs
// this binary's definition files, which the release of that version
// replaces with its own when its migrate runs. Below the definitions'
// migration the functions are that release's already.
func (r DowngradeResult) FunctionsLeftOver() bool { return r.Version >= definitionsVersion }

// PlanDown lists the migrations the database has applied above version,
// newest first: what MigrateDown(version) would undo. It refuses a version
// that is not below the database's, and a database newer than this binary,
// whose Down sections only the release that migrated it has.
func PlanDown(ctx context.Context, pool *pgxpool.Pool, version int64) ([]Migration, error) {
	migrations, err := OpenMigrations(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer migrations.Close()
	return migrations.planDown(ctx, version)
}

func (m *Migrations) planDown(ctx context.Context, version int64) ([]Migration, error) {
	current, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: read version: %w", err)
	}
	if current > LatestVersion() {
		return nil, fmt.Errorf("the database schema is at version %d, newer than this expiryctl (%d): take it down with the release that migrated it", current, LatestVersion())
	}
	if version < 0 || version >= current {
		return nil, fmt.Errorf("the database schema is at version %d: --down-to takes a version below it (0 removes the schema)", current)
	}
	var plan []Migration
	for _, s := range m.provider.ListSources() {
		if s.Version > version && s.Version <= current {
			plan = append([]Migration{{Version: s.Version, Name: strings.TrimSuffix(path.Base(s.Path), ".sql")}}, plan...)
		}
	}
	return plan, nil
}

// MigrateDown runs the Down sections of the migrations above version,
// newest first, each in its own transaction, so that a failure leaves the
// schema at the last version it reached. The definition files are not
// touched: see DowngradeResult.FunctionsLeftOver and the package doc.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, version int64) (DowngradeResult, error) {
	migrations, err := OpenMigrations(ctx, pool)
	if err != nil {
		return DowngradeResult{}, err
	}
	defer migrations.Close()
	plan, err := migrations.planDown(ctx, version)
	if err != nil {
		return DowngradeResult{}, err
	}
	var res DowngradeResult
	cfg := pool.Config().ConnConfig
	res.Server = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if err := pool.QueryRow(ctx, `SELECT current_database(), session_user`).Scan(&res.Database, &res.Login); err != nil {
		return res, fmt.Errorf("migrate: read the database's name: %w", err)
	}
	results, downErr := migrations.provider.DownTo(ctx, version)
	for _, r := range results {
		if r.Error == nil {
			res.Undone = append(res.Undone, Migration{Version: r.Source.Version, Name: strings.TrimSuffix(path.Base(r.Source.Path), ".sql")})
		}
	}
	res.Version, err = migrations.provider.GetDBVersion(ctx)
	if downErr != nil {
		return res, fmt.Errorf("migrate down to %d stopped at version %d: %w", version, res.Version, downErr)
	}
	if err != nil {
		return res, fmt.Errorf("migrate: read version: %w", err)
	}
	if len(res.Undone) != len(plan) {
		return res, fmt.Errorf("migrate down to %d undid %d of %d migrations", version, len(res.Undone), len(plan))
	}
	return res, nil
}
