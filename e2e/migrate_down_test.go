package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestMigrateDownAndUpAgain takes a migrated database down to 00020, the
// last release before the function files, and up again with the binary, as
// an operator rolling a release back and forward would: down asks first,
// leaves the functions as 00020 shipped them (the old form of
// ingest_letters is back, the definitions' table gone), commands refuse the
// schema until it is migrated again, and the trail records the downgrade.
func TestMigrateDownAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	c := newCLI(db.URL, "e2e-release")
	c.ok(t, "migrate")

	asked := c.exits(t, 2, "migrate", "--down-to", "20")
	if !strings.Contains(asked.stderr, "would undo 1 migration (00021_definitions_in_files)") || !strings.Contains(asked.stderr, "--yes") {
		t.Errorf("--down-to off a terminal without --yes should list what it would undo and ask for --yes: %s", asked)
	}

	down := c.ok(t, "migrate", "--down-to", "20", "--yes")
	if !strings.Contains(down.stderr, "undid 1 migration of database "+db.Name) || !strings.Contains(down.stderr, "is at version 20") ||
		strings.Contains(down.stderr, "still this release's") {
		t.Errorf("the downgrade should say what it undid and where the schema is: %s", down)
	}
	var definitions string
	var overloads int
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(to_regclass('expiryctl.schema_definitions')::text, ''),
		(SELECT count(*) FROM pg_proc WHERE proname = 'ingest_letters')`).Scan(&definitions, &overloads)
	if err != nil {
		t.Fatal(err)
	}
	if definitions != "" || overloads != 2 {
		t.Errorf("after the downgrade: definitions table %q, %d forms of ingest_letters; want none and 00020's two", definitions, overloads)
	}
	refused := c.exits(t, 6, "dlq", "summary")
	if !strings.Contains(refused.stderr, "version 20 but this expiryctl needs 21") {
		t.Errorf("a command on the downgraded schema should say which version it needs: %s", refused)
	}

	up := c.ok(t, "migrate")
	if !strings.Contains(up.stderr, "applied 1 migration to database "+db.Name) || !strings.Contains(up.stderr, "definitions too (functions/") {
		t.Errorf("migrating up again should apply 00021 and the definitions: %s", up)
	}
	trail := c.ok(t, "audit", "list", "--action", "schema.migrate.down", "-o", "json")
	if !strings.Contains(trail.stdout, `"to":20`) && !strings.Contains(trail.stdout, `"to": 20`) {
		t.Errorf("the trail should record the downgrade to 20: %s", trail)
	}
	c.ok(t, "audit", "verify")
}
