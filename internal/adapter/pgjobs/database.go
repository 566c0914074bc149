package pgjobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/store"
)

// Database is a job store's database as this package reaches it and
// names it in messages.
type Database struct {
	// System is the queue system as letters name it (river, pgboss): a
	// replay's message for another system is refused.
	System deadletter.System
	// Title is the system's name in messages: River, pg-boss.
	Title string
	// Name names the database in messages: the connection's name and the
	// server it reaches (a driver's Ref.DatabaseName).
	Name string
	// Jobs is the job table as to_regclass reads its name, around whose
	// rules a login may stand (store.RelationStanding).
	Jobs string
}

// errorf is err about the database: "the River database NAME: err".
func (d Database) errorf(err error) error {
	return fmt.Errorf("the %s database %s: %w", d.Title, d.Name, err)
}

// Standing is the login a pool's sessions have, and the ways it holds
// around the job store's own rules (a superuser, the owner of the job
// table: store.RelationStanding), for a command to warn of.
type Standing struct {
	Login string
	Kinds []string
}

// Check is a driver's look at a new pool before anything reads or writes
// through it: its job store's tables, of a version it knows, and the
// queue a reference names.
type Check func(ctx context.Context, pool *pgxpool.Pool) error

// Connect opens a pool on cfg, runs check on it and reads the login's
// standing around the job table; it closes the pool again when either
// fails.
func Connect(ctx context.Context, cfg *pgxpool.Config, db Database, check Check) (*pgxpool.Pool, Standing, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, Standing{}, db.errorf(err)
	}
	if err := check(ctx, pool); err != nil {
		pool.Close()
		return nil, Standing{}, err
	}
	login, kinds, err := store.RelationStanding(ctx, pool, db.Jobs)
	if err != nil {
		pool.Close()
		return nil, Standing{}, db.errorf(err)
	}
	return pool, Standing{Login: login, Kinds: kinds}, nil
}
