package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/store"
)

// postgresTables is tables over PostgreSQL: the only code of this package
// with SQL in it (postgres*.go). It writes only through the schema's
// SECURITY DEFINER functions, and never writes dead_letters, which
// deadletter owns: the functions that change a letter's status with its
// item do so in the database. Some reads join dead_letters, so that an
// item and its letter come from one snapshot (the runner's items with
// their letters, the approver's view of the cohort); the count of letters
// captured again is deadletter's (deadletter.CountRedeadLettered).
type postgresTables struct {
	q store.Querier
}

// onPostgres binds tables to q: a pool, a transaction or a connection.
func onPostgres(q store.Querier) tables { return postgresTables{q: q} }

// inTx runs fn on tables bound to a transaction of pool, committed when fn
// returns nil.
func inTx(ctx context.Context, pool *pgxpool.Pool, fn func(tables) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(onPostgres(tx)) })
}

// inReadOnlyTx runs fn on tables bound to a READ ONLY transaction of pool,
// committed when fn returns nil and rolled back (even once ctx is done)
// otherwise.
func inReadOnlyTx(ctx context.Context, pool *pgxpool.Pool, fn func(tables) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	if err := fn(onPostgres(tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// lockSession is a connection of its own for the runner's lease: the
// lease lives as long as its session, so it cannot be a pooled connection.
type lockSession struct {
	conn *pgx.Conn
}

// openLockSession connects to pool's database as a session of its own,
// named application so that a second runner can say who holds the lock.
func openLockSession(ctx context.Context, pool *pgxpool.Pool, application string) (lockSession, error) {
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = truncateText(application, 63)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	return lockSession{conn: conn}, err
}

func (s lockSession) tables() tables { return onPostgres(s.conn) }

func (s lockSession) close(ctx context.Context) error { return s.conn.Close(ctx) }

// stoppedUnless reads the status a run function returns: done when it did
// what was asked, otherwise the status it found the request in instead of
// running (the function then changed nothing).
func stoppedUnless(status, done Status) Status {
	if status != done {
		return status
	}
	return ""
}

// databaseError names what the schema's functions refused or did not find.
func databaseError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == store.NotFoundSQLState {
		kind, idText, _ := strings.Cut(pgErr.Detail, ":")
		id, _ := strconv.ParseInt(idText, 10, 64)
		switch kind {
		case "dead_letter":
			return &deadletter.NotFoundError{ID: id}
		case "replay_request":
			return &NotFoundError{ID: id}
		case "policy_change":
			return &PolicyChangeNotFoundError{ID: id}
		}
		return fmt.Errorf("%s: %w", pgErr.Message, deadletter.ErrNotFound)
	}
	return asRefusal(err)
}

// policyError is databaseError, with the policy table's own checks of a
// value named as the refusal they are.
func policyError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.HasPrefix(pgErr.ConstraintName, "policy_") &&
		pgErr.ConstraintName != "policy_four_eyes" {
		return refuse("policy-value", "the policy refuses that value (%s)", pgErr.ConstraintName)
	}
	return databaseError(err)
}

// isStatementError reports whether err is PostgreSQL's answer to a
// statement (bad SQL, a missing table, a timeout) rather than a failure to
// reach it.
func isStatementError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// durationScanner reads seconds (float8) into a time.Duration.
type durationScanner struct{ d *time.Duration }

func (s durationScanner) Scan(src any) error {
	switch v := src.(type) {
	case float64:
		*s.d = time.Duration(v * float64(time.Second))
		return nil
	case nil:
		*s.d = 0
		return nil
	}
	return fmt.Errorf("unexpected %T for a duration", src)
}

// nonNil sends an empty array, not NULL, for no ids.
func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func nonNilText(texts []string) []string {
	if texts == nil {
		return []string{}
	}
	return texts
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
