package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/store"
)

// runID tells this run's databases from those of another benchmark run on
// the same server, for cleanup by hand and for CPU attribution.
var runID = randomSuffix()[:6]

// benchDB is one scenario's private, migrated database. internal/fixture/pgtest does
// the same for tests but needs a testing.TB, so the benchmark has its own.
type benchDB struct {
	Name     string
	URL      string
	Pool     *pgxpool.Pool
	adminURL string
	// operator is the replay scenario's operator login: it requests and
	// runs.
	operator *pgxpool.Pool
	// logins are the roles login made, dropped with the database.
	logins []string
	pools  []*pgxpool.Pool
}

// login creates a login role for person in groups (full names) and returns
// a pool connected to the database as it: the benchmark acts as people,
// as a deployment does, so the functions' membership checks are paid for
// as they would be.
func (d *benchDB) login(ctx context.Context, person string, groups ...string) (*pgxpool.Pool, error) {
	admin, err := pgx.Connect(ctx, d.adminURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	name := "expiryctl_bench_" + runID + "_" + person + "_" + randomSuffix()[:4]
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN"); err != nil {
		return nil, fmt.Errorf("create login %s: %w", name, err)
	}
	d.logins = append(d.logins, name)
	for _, g := range groups {
		if _, err := admin.Exec(ctx, "GRANT "+pgx.Identifier{g}.Sanitize()+" TO "+ident); err != nil {
			return nil, fmt.Errorf("grant %s to %s: %w", g, name, err)
		}
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		return nil, err
	}
	u.User = url.User(name)
	pool, err := store.Open(ctx, u.String())
	if err != nil {
		return nil, err
	}
	d.pools = append(d.pools, pool)
	return pool, nil
}

// createDB creates a database named after purpose with a random suffix, so
// that two benchmark runs (or a run and the tests) never share one, and
// migrates it with the drivers' queue systems, as `expiryctl migrate` does.
func createDB(ctx context.Context, adminURL, purpose string) (*benchDB, error) {
	db, err := createEmptyDB(ctx, adminURL, purpose)
	if err != nil {
		return nil, err
	}
	if _, err := store.MigrateDeployment(ctx, db.Pool, "", registry.QueueSystems()...); err != nil {
		_ = db.drop()
		return nil, fmt.Errorf("migrate %s: %w", db.Name, err)
	}
	return db, nil
}

// jobStorePurpose starts the purpose of a job store's own database (River's,
// a team's jobs table's), which holds nothing of expiryctl's: takeCPU counts
// its backends apart from the archive's.
const jobStorePurpose = "jobs"

// createEmptyDB is createDB without expiryctl's schema, for a database that
// plays a job store's.
func createEmptyDB(ctx context.Context, adminURL, purpose string) (*benchDB, error) {
	name := "expiryctl_bench_" + runID + "_" + purpose + "_" + randomSuffix()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL is not reachable at the admin URL (%w): start it with scripts/services.sh or set -database-url", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	db := &benchDB{Name: name, URL: withDatabase(adminURL, name), adminURL: adminURL}
	db.Pool, err = store.Open(ctx, db.URL)
	if err != nil {
		_ = db.drop()
		return nil, err
	}
	return db, nil
}

// drop closes the pool and drops the database. It does not take the
// scenario's context: an interrupted run must still clean up.
func (d *benchDB) drop() error {
	if d.Pool != nil {
		d.Pool.Close()
	}
	for _, p := range d.pools {
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, d.adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", d.Name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", d.Name, err)
	}
	for _, name := range d.logins {
		if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("drop login %s: %w", name, err)
		}
	}
	return nil
}

// withDatabase returns rawURL pointing at database name.
func withDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Path = "/" + name
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// settle waits for PostgreSQL's own background work to end before a timed
// run: seeding leaves a checkpoint due and tables for autovacuum, and either
// running mid-measurement lands on whichever side is timed then. It vacuums
// and analyses the database and takes the checkpoint itself, then waits (up
// to a minute) for autovacuum workers to finish, and reports how long that
// took.
func (d *benchDB) settle(ctx context.Context, logf func(string, ...any)) error {
	start := time.Now()
	if _, err := d.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("settle: vacuum: %w", err)
	}
	if _, err := d.Pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("settle: checkpoint: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var busy int
		if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&busy); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if busy == 0 || time.Now().After(deadline) {
			logf("settled in %s (autovacuum workers still running: %d)", time.Since(start).Round(time.Millisecond), busy)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
