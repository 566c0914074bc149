package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestMigrateClosesTheDatabaseToStrangers migrates as the database's
// owner, which closes it, and as a schema owner that does not own the
// database, which is told the statements a DBA runs; a second migrate of a
// closed database finds nothing to do.
func TestMigrateClosesTheDatabaseToStrangers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := ownedEmptyDatabase(t)
	res, err := store.Migrate(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Access.Closed || len(res.Access.Pending) != 0 {
		t.Fatalf("migrate as the database's owner: %+v, want it closed", res.Access)
	}
	var publicConnect, publicTemp, operatorConnect, auditorTemp bool
	if err := db.Pool.QueryRow(ctx, `SELECT has_database_privilege('public', current_database(), 'CONNECT'),
		has_database_privilege('public', current_database(), 'TEMPORARY'),
		has_database_privilege('expiryctl_operator', current_database(), 'CONNECT'),
		has_database_privilege('expiryctl_auditor', current_database(), 'TEMPORARY')`).Scan(&publicConnect, &publicTemp, &operatorConnect, &auditorTemp); err != nil {
		t.Fatal(err)
	}
	if publicConnect || publicTemp || !operatorConnect || !auditorTemp {
		t.Fatalf("after migrate: PUBLIC connect %v temp %v, operator connect %v, auditor temp %v", publicConnect, publicTemp, operatorConnect, auditorTemp)
	}
	if again, err := store.Migrate(ctx, owner); err != nil || !again.Access.Closed {
		t.Fatalf("second migrate: %+v, %v", again.Access, err)
	}

	// A DBA opens it again and gives the database to someone else: the
	// schema's owner cannot close it, and says how.
	if _, err := db.Pool.Exec(ctx, "GRANT CONNECT, TEMPORARY ON DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" TO PUBLIC"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" OWNER TO postgres"); err != nil {
		t.Fatal(err)
	}
	res, err = store.Migrate(ctx, pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Access.Closed || len(res.Access.Pending) != 3 || !strings.HasPrefix(res.Access.Pending[0], "REVOKE CONNECT, TEMPORARY ON DATABASE") ||
		!strings.Contains(res.Access.Pending[1], pgtest.Owner) {
		t.Fatalf("migrate by a schema owner that does not own the database: %+v, want the statements", res.Access)
	}
}
