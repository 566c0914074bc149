package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/store"
)

// runID tells this run's databases from those of another benchmark run on
// the same server, for cleanup by hand and for CPU attribution.
var runID = randomSuffix()[:6]

// benchDB is one scenario's private, migrated database. internal/pgtest does
// the same for tests but needs a testing.TB, so the benchmark has its own.
type benchDB struct {
	Name     string
	URL      string
	Pool     *pgxpool.Pool
	adminURL string
}

// createDB creates a database named after purpose with a random suffix, so
// that two benchmark runs (or a run and the tests) never share one, and
// migrates it with store.Migrate, the code path `expiryctl migrate` takes.
func createDB(ctx context.Context, adminURL, purpose string) (*benchDB, error) {
	name := "expiryctl_bench_" + runID + "_" + purpose + "_" + randomSuffix()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL is not reachable at the admin URL (%v): start it with scripts/services.sh or set -database-url", err)
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
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		_ = db.drop()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return db, nil
}

// drop closes the pool and drops the database. It does not take the
// scenario's context: an interrupted run must still clean up.
func (d *benchDB) drop() error {
	if d.Pool != nil {
		d.Pool.Close()
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
