package commands

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// MigrateOptions holds what `expiryctl migrate` needs.
type MigrateOptions struct {
	IO    *IOStreams
	Actor func() string
	DB    func(context.Context) (*pgxpool.Pool, error)
}

// NewCmdMigrate builds `expiryctl migrate`. runF replaces the run function in
// tests that check flag parsing only.
func NewCmdMigrate(f *Factory, runF func(context.Context, *MigrateOptions) error) *cobra.Command {
	opts := &MigrateOptions{IO: f.IO, Actor: f.Actor, DB: f.RawDB}
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
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	res, err := store.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	if err := audit.Record(ctx, pool, audit.Entry{Actor: opts.Actor(), Action: "schema.migrate",
		Details: map[string]any{"applied": res.Applied, "version": res.Version}}); err != nil {
		return err
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "schema is up to date (version %d)\n", res.Version)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "applied %d migration(s); schema is at version %d\n", len(res.Applied), res.Version)
	return nil
}
