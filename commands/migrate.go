package commands

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/store"
)

// MigrateOptions holds what `expiryctl migrate` needs.
type MigrateOptions struct {
	IO       *IOStreams
	Migrator func(context.Context) (service.Migrator, error)
}

// NewCmdMigrate builds `expiryctl migrate`. runF replaces the run function in
// tests that check flag parsing only.
func NewCmdMigrate(f *Factory, runF func(context.Context, *MigrateOptions) error) *cobra.Command {
	opts := &MigrateOptions{IO: f.IO, Migrator: f.Migrator}
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade expiryctl's schema in PostgreSQL",
		Long: `Apply the database migrations built into this binary to the schema "expiryctl".

Safe to run again (it applies only what is missing) and from several hosts at
once (runs are serialised by a PostgreSQL advisory lock).`,
		Example: `  expiryctl migrate
  expiryctl migrate --database-url postgres://expiryctl@db.internal/expiryctl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
}

func migrateRun(ctx context.Context, opts *MigrateOptions) error {
	migrator, err := opts.Migrator(ctx)
	if err != nil {
		return err
	}
	res, err := migrator.Migrate(ctx)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("database %s on %s (as %s)", termsafe.EscapeLine(res.Database), termsafe.EscapeLine(res.Server), termsafe.EscapeLine(res.Login))
	if len(res.Applied) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "schema %s of %s is up to date (version %d)\n", store.Schema, where, res.Version)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "applied %s to %s; schema %s is at version %d\n",
		phrase.Count(len(res.Applied), "migration", "migrations"), where, store.Schema, res.Version)
	return nil
}
