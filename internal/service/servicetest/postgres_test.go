package servicetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service/servicetest"
)

// The contracts against the services expiryctl runs: each case has a
// database of its own, and acts through logins that are neither superusers
// nor owners except where the case is the owner.

func TestAccessContractPostgres(t *testing.T) {
	t.Parallel()
	servicetest.Access(t, func(t *testing.T) servicetest.AccessWorld {
		db := pgtest.New(t)
		member := db.Login(t, "mallory", pgtest.AllGroups...)
		return servicetest.AccessWorld{
			Owner:    &access.Service{Pool: db.Pool, Actor: "owner"},
			Member:   &access.Service{Pool: member.Pool, Actor: "mallory"},
			NewLogin: func(person string) string { return db.Login(t, person).Name },
			NewRole:  func(name string) string { return nologinRole(t, db, name) },
		}
	})
}

// nologinRole makes a role that cannot log in, dropped when t ends.
func nologinRole(t *testing.T, db *pgtest.Database, name string) string {
	t.Helper()
	admin := db.Superuser(t)
	role := db.Login(t, name).Name // a unique name, then made a group
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := admin.Exec(context.Background(), "ALTER ROLE "+ident+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	return role
}
