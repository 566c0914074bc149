package commands

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

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

	// DownTo is the version --down-to names, -1 without it.
	DownTo int64
	Yes    bool
	// Deployment is --deployment's name.
	Deployment string
}

// NewCmdMigrate builds `expiryctl migrate`. runF replaces the run function in
// tests that check flag parsing only.
func NewCmdMigrate(f *Factory, runF func(context.Context, *MigrateOptions) error) *cobra.Command {
	opts := &MigrateOptions{IO: f.IO, Migrator: f.Migrator, DownTo: -1}
	cmd := &cobra.Command{
		Use:   "migrate [--down-to VERSION [--yes]]",
		Short: "Create, upgrade or downgrade expiryctl's schema in PostgreSQL",
		Long: `Apply the database migrations built into this binary to the schema "expiryctl",
then its function definitions where the database runs another form of them.

Safe to run again (it applies only what is missing, and says so when nothing
is) and from several hosts at once (runs are serialised by locks).

--down-to VERSION takes the schema back to an older release's version by
running the Down sections of the newer migrations, newest first. It may drop
columns and tables with what they hold, so it lists them and asks first (or
takes --yes). The functions stay this release's until the older release's
own "expiryctl migrate" replaces them with its files; below version 21 they
are the older release's at once.

--deployment NAME installs the schema for a named deployment, whose groups
(expiryctl_NAME_operator, …) a DBA made with expiryctl access bootstrap OWNER
--deployment NAME: PostgreSQL's roles are the cluster's, and a deployment's
own groups grant nothing in another's database. The name is fixed once the
schema is installed, and later migrates need not repeat it. Given for a
schema of the unnamed deployment (groups expiryctl_operator, …), it moves the
schema to the named groups: their privileges, and the people this trail
granted (each move audited as access.grant); members the trail does not
account for are listed, not moved.`,
		Example: `  expiryctl migrate
  expiryctl migrate --database-url postgres://expiryctl@db.internal/expiryctl
  expiryctl migrate --down-to 20 --yes     # back to the schema of a release at version 20
  expiryctl migrate --deployment billing   # a cluster shared with other deployments`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("down-to") {
				if opts.Yes {
					return flagErrorf("--yes confirms a --down-to: a migrate up asks nothing")
				}
				opts.DownTo = -1
			} else if opts.Deployment != "" {
				return flagErrorf("--deployment names the deployment a migrate up installs: a --down-to keeps the schema's")
			} else if opts.DownTo < 0 {
				return flagErrorf("invalid --down-to %d: name the version to go back to (0 removes the schema)", opts.DownTo)
			}
			if opts.Deployment != "" {
				if err := store.CheckDeploymentName(opts.Deployment); err != nil {
					return &FlagError{Err: fmt.Errorf("--deployment: %w", err)}
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().Int64Var(&opts.DownTo, "down-to", -1, "take the schema down to this version (an older release's)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "with --down-to: do not ask for confirmation")
	cmd.Flags().StringVar(&opts.Deployment, "deployment", "", "install (or move the schema to) the named deployment's groups")
	return cmd
}

func migrateRun(ctx context.Context, opts *MigrateOptions) error {
	migrator, err := opts.Migrator(ctx)
	if err != nil {
		return err
	}
	if opts.DownTo >= 0 {
		return migrateDownRun(ctx, opts, migrator)
	}
	res, err := migrator.Migrate(ctx, store.Deployment(opts.Deployment))
	if err != nil {
		return err
	}
	where := fmt.Sprintf("database %s on %s (as %s)", termsafe.EscapeLine(res.Database), termsafe.EscapeLine(res.Server), termsafe.EscapeLine(res.Login))
	defs := res.Definitions.Replaced
	switch {
	case len(res.Applied) > 0:
		fmt.Fprintf(opts.IO.ErrOut, "applied %s to %s; schema %s is at version %d\n",
			phrase.Count(len(res.Applied), "migration", "migrations"), where, store.Schema, res.Version)
		if len(defs) > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "applied %s too (%s)\n", phrase.Count(len(defs), "definition", "definitions"), fewNamed(defs))
		}
	case len(defs) > 0:
		fmt.Fprintf(opts.IO.ErrOut, "applied %s (%s) to %s; schema %s is at version %d\n",
			phrase.Count(len(defs), "definition", "definitions"), fewNamed(defs), where, store.Schema, res.Version)
	default:
		fmt.Fprintf(opts.IO.ErrOut, "schema %s of %s is up to date (version %d)\n", store.Schema, where, res.Version)
	}
	if dropped := res.Definitions.Dropped; len(dropped) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "dropped what no definition file defines any more: %s\n", termsafe.EscapeLine(strings.Join(dropped, ", ")))
	}
	if added := res.Systems.Added; len(added) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "registered %s: %s\n", phrase.Count(len(added), "queue system", "queue systems"), fewNamed(added))
	}
	if changed := res.Systems.Changed; len(changed) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "changed %s as its driver describes it now: %s\n", phrase.Count(len(changed), "queue system", "queue systems"), fewNamed(changed))
	}
	if res.Deployment.Named() {
		fmt.Fprintf(opts.IO.ErrOut, "deployment %s: groups %s\n", termsafe.EscapeLine(string(res.Deployment)), strings.Join(res.Deployment.Groups(), ", "))
	}
	if mv := res.Moved; mv != nil {
		writeDeploymentMove(opts.IO.ErrOut, mv)
	}
	if shared := res.SharedWith; len(shared) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "warning: the groups %s also admit people to %s on this cluster: a member there is a member here. Give each deployment a name of its own (`expiryctl access bootstrap OWNER --deployment NAME`, then `expiryctl migrate --deployment NAME`; docs/governance.md#many-deployments-on-one-cluster)\n",
			strings.Join(res.Deployment.Groups(), ", "), fewNamed(shared))
	}
	if pending := res.Access.Pending; len(pending) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "warning: any login may connect to database %s, and %s may not close it; ask a DBA (its owner or a superuser) to run:\n",
			termsafe.EscapeLine(res.Database), termsafe.EscapeLine(res.Login))
		for _, s := range pending {
			fmt.Fprintf(opts.IO.ErrOut, "  %s;\n", termsafe.EscapeLine(s))
		}
	}
	return nil
}

// fewNamed names names (definition files, databases), all of them when a
// few and the count of the rest otherwise: a first migrate replaces every
// file.
func fewNamed(files []string) string {
	const shown = 5
	names := make([]string, 0, shown)
	for i, f := range files {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(files)-shown))
			break
		}
		names = append(names, termsafe.EscapeLine(f))
	}
	return strings.Join(names, ", ")
}

func migrateDownRun(ctx context.Context, opts *MigrateOptions, migrator service.Migrator) error {
	plan, err := migrator.PlanDown(ctx, opts.DownTo)
	if err != nil {
		return err
	}
	names := make([]string, len(plan))
	for i, m := range plan {
		names[i] = m.Name
	}
	undo := fmt.Sprintf("undo %s (%s), newest first", phrase.Count(len(plan), "migration", "migrations"), termsafe.EscapeLine(strings.Join(names, ", ")))
	if !opts.Yes {
		if !opts.IO.StdoutTTY || !opts.IO.StderrTTY {
			return flagErrorf("migrate --down-to %d would %s, dropping what they added and what it holds, and is not on a terminal to ask: add --yes", opts.DownTo, undo)
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s? What they added is dropped with what it holds. [y/N] ", undo)
		answer, _ := bufio.NewReader(opts.IO.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return fmt.Errorf("migrate --down-to not confirmed: nothing was undone: %w", context.Canceled)
		}
	}
	res, err := migrator.Downgrade(ctx, opts.DownTo)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("database %s on %s (as %s)", termsafe.EscapeLine(res.Database), termsafe.EscapeLine(res.Server), termsafe.EscapeLine(res.Login))
	fmt.Fprintf(opts.IO.ErrOut, "undid %s of %s; schema %s is at version %d\n",
		phrase.Count(len(res.Undone), "migration", "migrations"), where, store.Schema, res.Version)
	if res.FunctionsLeftOver() {
		fmt.Fprintf(opts.IO.ErrOut, "its functions are still this release's: run `expiryctl migrate` with the release of version %d to put its own in place\n", res.Version)
	}
	return nil
}

// writeDeploymentMove says what moving the schema to its deployment's
// groups did, and what is left for the owner and the DBA.
func writeDeploymentMove(w io.Writer, mv *store.DeploymentMove) {
	fmt.Fprintf(w, "moved the schema to the deployment %s's groups: %s\n",
		termsafe.EscapeLine(string(mv.To)), phrase.Count(mv.Privileges, "privilege", "privileges"))
	for _, m := range mv.Members {
		fmt.Fprintf(w, "  %s: granted %s (the trail granted it the unnamed groups)\n", termsafe.EscapeLine(m.Login), strings.Join(m.Groups, ", "))
	}
	for _, m := range mv.NotMoved {
		fmt.Fprintf(w, "warning: %s is a member of %s, which this trail never granted, and was not moved: if the login belongs to this deployment, run `expiryctl access grant %s ROLE…`\n",
			termsafe.EscapeLine(m.Login), strings.Join(m.Groups, ", "), termsafe.EscapeLine(m.Login))
	}
	if len(mv.Elsewhere) > 0 {
		fmt.Fprintf(w, "warning: the unnamed groups also hold privileges outside the schema (the policy's queries may read these tables); their owners run:\n")
		for _, s := range mv.Elsewhere {
			fmt.Fprintf(w, "  %s;\n", termsafe.EscapeLine(s))
		}
	}
}
