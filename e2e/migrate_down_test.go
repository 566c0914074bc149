package e2e_test

import (
	"context"
	"fmt"
	"os"
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
	// Every migration from 00021 on is undone, newest first.
	latest := latestMigration(t)
	undone := phraseMigrations(latest - 20)

	asked := c.exits(t, 2, "migrate", "--down-to", "20")
	if !strings.Contains(asked.stderr, "would undo "+undone+" (") || !strings.Contains(asked.stderr, "00021_definitions_in_files)") ||
		!strings.Contains(asked.stderr, "--yes") {
		t.Errorf("--down-to off a terminal without --yes should list what it would undo and ask for --yes: %s", asked)
	}

	down := c.ok(t, "migrate", "--down-to", "20", "--yes")
	if !strings.Contains(down.stderr, "undid "+undone+" of database "+db.Name) || !strings.Contains(down.stderr, "is at version 20") ||
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
	if !strings.Contains(refused.stderr, fmt.Sprintf("version 20 but this expiryctl needs %d", latest)) {
		t.Errorf("a command on the downgraded schema should say which version it needs: %s", refused)
	}

	up := c.ok(t, "migrate")
	if !strings.Contains(up.stderr, "applied "+undone+" to database "+db.Name) || !strings.Contains(up.stderr, "definitions too (functions/") {
		t.Errorf("migrating up again should apply 00021 and the definitions: %s", up)
	}
	trail := c.ok(t, "audit", "list", "--action", "schema.migrate.down", "-o", "json")
	if !strings.Contains(trail.stdout, `"to":20`) && !strings.Contains(trail.stdout, `"to": 20`) {
		t.Errorf("the trail should record the downgrade to 20: %s", trail)
	}
	c.ok(t, "audit", "verify")
}

// latestMigration is the number of the newest numbered migration in the
// source tree, which the binary under test embeds.
func latestMigration(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("../store/migrations")
	if err != nil {
		t.Fatal(err)
	}
	latest := 0
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

func phraseMigrations(n int) string {
	if n == 1 {
		return "1 migration"
	}
	return fmt.Sprintf("%d migrations", n)
}
