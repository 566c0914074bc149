package commands

import (
	"context"
	"strings"
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

// TestMigrateSaysWhatDefinitionsItReplaced: the function files a migrate
// applied are named, a few at a time, and what it dropped too.
func TestMigrateSaysWhatDefinitionsItReplaced(t *testing.T) {
	t.Parallel()
	f, _, errOut := testFactory(t)
	res := store.MigrationResult{Database: "expiryctl", Server: "db.internal:5432", Login: "expiryctl_owner", Version: 21,
		Definitions: store.DefinitionsResult{Total: 57, Replaced: []string{"functions/purge_letters.sql"},
			Dropped: []string{"expiryctl.replay_run_halt(text,bigint,text,bigint[],jsonb)"}}}
	err := runCmd(NewCmdMigrate(f, func(ctx context.Context, o *MigrateOptions) error {
		o.Migrator = serve[service.Migrator](&fakes.Migrator{Result: res})
		return migrateRun(ctx, o)
	}))
	want := "applied 1 definition (functions/purge_letters.sql) to database expiryctl on db.internal:5432 (as expiryctl_owner); schema expiryctl is at version 21\n" +
		"dropped what no definition file defines any more: expiryctl.replay_run_halt(text,bigint,text,bigint[],jsonb)\n"
	if err != nil || errOut.String() != want {
		t.Fatalf("migrate = %v, %q; want %q", err, errOut.String(), want)
	}
	if got := fewNamed([]string{"a", "b", "c", "d", "e", "f", "g"}); got != "a, b, c, d, e, and 2 more" {
		t.Errorf("seven files are listed as %q", got)
	}
}

// TestMigrateDownAsksAndSaysWhatIsLeft: --down-to lists what it would
// undo, goes on only with --yes (or a yes on a terminal), and says when the
// functions are still this release's.
func TestMigrateDownAsksAndSaysWhatIsLeft(t *testing.T) {
	t.Parallel()
	plan := []store.Migration{{Version: 22, Name: "00022_later"}, {Version: 21, Name: "00021_definitions_in_files"}}
	down := func(t *testing.T, m *fakes.Migrator, args ...string) (string, error) {
		t.Helper()
		f, _, errOut := testFactory(t)
		err := runCmd(NewCmdMigrate(f, func(ctx context.Context, o *MigrateOptions) error {
			o.Migrator = serve[service.Migrator](m)
			return migrateRun(ctx, o)
		}), args...)
		return errOut.String(), err
	}

	m := &fakes.Migrator{Plan: plan}
	_, err := down(t, m, "--down-to", "20")
	wantExit(t, err, ExitUsage)
	if !strings.Contains(err.Error(), "would undo 2 migrations (00022_later, 00021_definitions_in_files), newest first") || m.Calls != 0 {
		t.Errorf("--down-to without --yes off a terminal: %v, %d calls; want the list and nothing run", err, m.Calls)
	}

	m = &fakes.Migrator{Plan: plan, Down: store.DowngradeResult{Undone: plan, Version: 20, Database: "expiryctl", Server: "db:5432", Login: "owner"}}
	errOut, err := down(t, m, "--down-to", "20", "--yes")
	if err != nil || m.DownTo != 20 || errOut != "undid 2 migrations of database expiryctl on db:5432 (as owner); schema expiryctl is at version 20\n" {
		t.Fatalf("--down-to 20 --yes = %v, to %d, %q", err, m.DownTo, errOut)
	}

	m = &fakes.Migrator{Plan: plan[:1], Down: store.DowngradeResult{Undone: plan[:1], Version: 21, Database: "expiryctl", Server: "db:5432", Login: "owner"}}
	errOut, err = down(t, m, "--down-to", "21", "--yes")
	if err != nil || !strings.Contains(errOut, "its functions are still this release's: run `expiryctl migrate` with the release of version 21") {
		t.Fatalf("--down-to 21 --yes = %v, %q; want the functions' next step", err, errOut)
	}

	for _, args := range [][]string{{"--yes"}, {"--down-to", "-3"}} {
		if _, err := down(t, &fakes.Migrator{}, args...); err == nil {
			t.Errorf("migrate %v: no error", args)
		} else {
			wantExit(t, err, ExitUsage)
		}
	}
}
