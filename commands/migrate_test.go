package commands

import (
	"context"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

// TestMigrateRun checks what `migrate` says; migrating itself (and the
// schema.migrate row) is tested on real databases in internal/adapter/store
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
	out, errOut, err := migrate(t, &fakes.Migrator{Result: store.MigrationResult{Applied: []int64{10, 11}, Version: 11}})
	if err != nil || out != "" || errOut != "applied 2 migration(s); schema is at version 11\n" {
		t.Fatalf("migrate = %v, %q, %q", err, out, errOut)
	}
	_, errOut, err = migrate(t, &fakes.Migrator{Result: store.MigrationResult{Version: 11}})
	if err != nil || errOut != "schema is up to date (version 11)\n" {
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
