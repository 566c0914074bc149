package jobtable

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// QueueName is the name letters from m's table carry, and that a replay
// names it by: jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE, with no login
// and no password, from a connection string such as
// postgres://USER@HOST:PORT/DATABASE.
func QueueName(connString string, m Mapping) (string, error) {
	if err := m.Check(); err != nil {
		return "", err
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgconn's parse errors show the connection string with its
		// password masked.
		return "", fmt.Errorf("the jobs table's database: %w", err)
	}
	return queueName(cfg, m), nil
}

func queueName(cfg *pgxpool.Config, m Mapping) string {
	host := strings.ToLower(cfg.ConnConfig.Host)
	return deadletter.JobTableQueuePrefix + net.JoinHostPort(host, strconv.Itoa(int(cfg.ConnConfig.Port))) +
		"/" + url.PathEscape(cfg.ConnConfig.Database) + "/" + m.Table
}

// openPool connects to the jobs table's database and checks the table
// against m and the login's privileges against what the caller does.
// Every session's TimeZone is UTC, so that a timestamp kept as a native
// column reads the same whichever machine captures it.
func openPool(ctx context.Context, connString string, m Mapping, maxConns int32, write bool) (*pgxpool.Pool, *table, string, error) {
	if err := m.Check(); err != nil {
		return nil, nil, "", err
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, nil, "", fmt.Errorf("the jobs table's database: %w", err)
	}
	name := queueName(cfg, m)
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "expiryctl"
	}
	if !write {
		// Belt and braces with the read-only transactions: no statement
		// of a capture can write, whatever the login may.
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("the jobs table %s: %w", name, err)
	}
	tab, err := inspect(ctx, pool, m)
	if err == nil {
		err = tab.checkPrivileges(cfg.ConnConfig.User, write)
	}
	if err != nil {
		pool.Close()
		var mapping *MappingError
		if errors.As(err, &mapping) {
			return nil, nil, "", err
		}
		return nil, nil, "", fmt.Errorf("the jobs table %s: %w", name, err)
	}
	return pool, tab, name, nil
}

// lastingError says whether err is PostgreSQL's answer about the query or
// the login rather than about the server's life: syntax or access rule
// violations (class 42) and authorisation (class 28) stay as they are
// however often a read is tried.
func lastingError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "28"))
}
