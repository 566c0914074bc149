package commands

import (
	"context"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/store"
)

// TestMigrateRun checks what `migrate` says; migrating itself (and the
// schema.migrate row) is tested on real databases in store
// and e2e (TestEndToEnd/migrate).
func TestMigrateRun(t *testing.T) {
	t.Parallel()
	migrate := func(t *testing.T, m *fakes.Migrator) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdMigrate(f, func(ctx context.Context, o *MigrateOptions) error {
			o.Migrator = serve[service.Migrator](m)
			return migrateRun(ctx, o)
		}))
		return out.String(), errOut.String(), err
	}
	where := store.MigrationResult{Database: "expiryctl", Server: "db.internal:5432", Login: "expiryctl_owner"}
	applied := where
	applied.Applied, applied.Version = []int64{10, 11}, 11
	out, errOut, err := migrate(t, &fakes.Migrator{Result: applied})
	if want := "applied 2 migrations to database expiryctl on db.internal:5432 (as expiryctl_owner); schema expiryctl is at version 11\n"; err != nil || out != "" || errOut != want {
		t.Fatalf("migrate = %v, %q, %q", err, out, errOut)
	}
	current := where
	current.Version = 11
	_, errOut, err = migrate(t, &fakes.Migrator{Result: current})
	if err != nil || errOut != "schema expiryctl of database expiryctl on db.internal:5432 (as expiryctl_owner) is up to date (version 11)\n" {
		t.Fatalf("migrate again = %v, %q", err, errOut)
	}
	_, errOut, err = migrate(t, &fakes.Migrator{Err: &store.SchemaOutdatedError{}})
	wantExit(t, err, ExitSchema)
	if errOut != "" {
		t.Fatalf("a failed migration printed %q", errOut)
	}
	f, _, _ := testFactory(t)
	err = runCmd(NewCmdMigrate(f, func(ctx context.Context, o *MigrateOptions) error {
		o.Migrator = unreachable[service.Migrator]()
		return migrateRun(ctx, o)
	}))
	wantExit(t, err, ExitUnavailable)
}
