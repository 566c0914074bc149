package jobtable

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/store"
)

// openPool connects to the jobs table's database and checks the table
// against m and the login's privileges against what the caller does.
// Every session's TimeZone is UTC, so that a timestamp kept as a native
// column reads the same whichever machine captures it.
func openPool(ctx context.Context, ref Ref, m Mapping, maxConns int32, write bool) (*pgxpool.Pool, *table, string, error) {
	pool, tab, name, err := openPoolChecked(ctx, ref, m, maxConns, write)
	if err != nil {
		return nil, nil, "", err
	}
	if tab.login, tab.standing, err = store.RelationStanding(ctx, pool, m.Table); err != nil {
		pool.Close()
		return nil, nil, "", fmt.Errorf("the jobs table %s: %w", name, err)
	}
	return pool, tab, name, nil
}

// openPoolChecked is openPool before the login's standing is read.
func openPoolChecked(ctx context.Context, ref Ref, m Mapping, maxConns int32, write bool) (*pgxpool.Pool, *table, string, error) {
	if err := m.Check(); err != nil {
		return nil, nil, "", err
	}
	if ref.Table != m.Table {
		return nil, nil, "", fmt.Errorf("the jobs table %s: its mapping is of table %s", ref.Name(), m.Table)
	}
	if err := ref.Login(); err != nil {
		return nil, nil, "", err
	}
	cfg, err := pgxpool.ParseConfig(ref.ConnString)
	if err != nil {
		// pgconn's parse errors show the connection string with its
		// password masked.
		return nil, nil, "", fmt.Errorf("the jobs table's database: %w", err)
	}
	name := ref.Name()
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
