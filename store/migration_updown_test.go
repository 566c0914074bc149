package store_test

import (
	"context"
	"testing"

	"github.com/expiryctl/expiryctl/store"
)

// TestEveryMigrationGoesUpDownAndUp steps one database through every
// version: up to it, down to the one before, and up again must give the
// same schema, so that each Down section undoes exactly its Up (a Down that
// is never run is a Down nobody knows to work). Then all the way down to
// nothing and up again must give today's schema. The groups are the
// cluster's and other tests' databases use them: no Down drops them
// (00008's leaves them on purpose), and the test would show it if one did.
func TestEveryMigrationGoesUpDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := ownedEmptyDatabase(t)
	migrations, err := store.OpenMigrations(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer migrations.Close()

	versions := migrations.Versions()
	var previous, latest int64
	var latestSchema string
	for _, v := range versions {
		if err := migrations.UpTo(ctx, v); err != nil {
			t.Fatal(err)
		}
		up := dumpSchema(t, db)
		if err := migrations.DownTo(ctx, previous); err != nil {
			t.Fatalf("migration %05d's Down section: %v", v, err)
		}
		if err := migrations.UpTo(ctx, v); err != nil {
			t.Fatalf("migration %05d up again after its Down: %v", v, err)
		}
		if again := dumpSchema(t, db); again != up {
			t.Fatalf("migration %05d up, down and up again leaves another schema than up once: its Down does not undo its Up exactly.\n%s",
				v, diffExcerpt(up, again, "up", "up, down, up"))
		}
		previous, latest, latestSchema = v, v, up
	}
	if latest != store.LatestVersion() {
		t.Fatalf("stepped up to %05d, but the newest migration is %05d", latest, store.LatestVersion())
	}

	if err := migrations.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to nothing: %v", err)
	}
	if err := migrations.UpTo(ctx, latest); err != nil {
		t.Fatalf("up again from nothing: %v", err)
	}
	if again := dumpSchema(t, db); again != latestSchema {
		t.Fatalf("all the way down and up again leaves another schema than migrating once.\n%s",
			diffExcerpt(latestSchema, again, "migrated once", "down to nothing and up"))
	}
}
