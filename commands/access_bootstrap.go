package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/store"
)

// AccessBootstrapOptions holds what `expiryctl access bootstrap` needs.
type AccessBootstrapOptions struct {
	IO *IOStreams
	// Bootstrap runs the bootstrap as the connected login (a DBA's).
	Bootstrap  func(ctx context.Context, owner string, d store.Deployment, logins []string) (access.BootstrapResult, error)
	Owner      string
	Deployment string
	Logins     []string
	Print      bool
	Output     *outputFormat
}

// NewCmdAccessBootstrap builds `expiryctl access bootstrap`.
func NewCmdAccessBootstrap(f *Factory, runF func(context.Context, *AccessBootstrapOptions) error) *cobra.Command {
	opts := &AccessBootstrapOptions{IO: f.IO, Bootstrap: f.Bootstrap}
	cmd := &cobra.Command{
		Use:   "bootstrap OWNER",
		Short: "Set a deployment up for its owner (run once, by a DBA)",
		Long: `Run once by a DBA (a superuser or a CREATEROLE login), before the owner's
first ` + "`expiryctl migrate`" + `: creates the deployment's five NOLOGIN groups where
they do not exist, and gives OWNER, the login that will own the schema, ADMIN
OPTION on each. The owner then migrates and grants the groups with no
CREATEROLE, which would let it grant itself any role. --login creates a login
for a person (set its password, or another authentication, yourself).

PostgreSQL's roles belong to the cluster, not to a database: on a cluster
that serves more than one expiryctl database, give each its own --deployment
NAME, and its groups are expiryctl_NAME_ingester, expiryctl_NAME_operator and
so on, so that a membership granted for one database grants nothing in
another. The owner's first migrate names it too (expiryctl migrate
--deployment NAME); the name is fixed from then on. Without --deployment the
groups are expiryctl_ingester, expiryctl_operator, …, for a cluster with one
deployment.

--print writes the statements instead of running them, for a DBA who runs
them by hand; it connects to nothing. The bootstrap may run again: what
exists is kept. It is not audited, since the trail may not exist yet:
` + "`expiryctl access list`" + ` shows the result.`,
		Example: `  # as a DBA, once
  expiryctl access bootstrap expiryctl_owner --login alice --login bob
  # a cluster shared with other deployments: the groups carry the name
  expiryctl access bootstrap billing_owner --deployment billing
  # or print the statements to run them yourself
  expiryctl access bootstrap expiryctl_owner --print | psql`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("access bootstrap takes the owner's login, e.g. `expiryctl access bootstrap expiryctl_owner`")
			}
			opts.Owner = args[0]
			if opts.Deployment != "" {
				if err := store.CheckDeploymentName(opts.Deployment); err != nil {
					return &FlagError{Err: fmt.Errorf("--deployment: %w", err)}
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return accessBootstrapRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.Logins, "login", nil, "create this login too (repeatable)")
	cmd.Flags().StringVar(&opts.Deployment, "deployment", "", "name the deployment, whose groups then carry the name (a cluster shared by several)")
	cmd.Flags().BoolVar(&opts.Print, "print", false, "write the SQL statements to stdout instead of running them")
	opts.Output = addOutputFlag(cmd, "text", "json")
	return cmd
}

func accessBootstrapRun(ctx context.Context, opts *AccessBootstrapOptions) error {
	if opts.Print {
		for _, s := range access.BootstrapStatements(opts.Owner, store.Deployment(opts.Deployment), opts.Logins) {
			fmt.Fprintf(opts.IO.Out, "%s;\n", s)
		}
		return nil
	}
	res, err := opts.Bootstrap(ctx, opts.Owner, store.Deployment(opts.Deployment), opts.Logins)
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, res)
	}
	created := "none (they existed)"
	if len(res.Created) > 0 {
		created = strings.Join(res.Created, ", ")
	}
	fmt.Fprintf(opts.IO.Out, "groups created: %s\n", created)
	fmt.Fprintf(opts.IO.Out, "%s administers %s\n", termsafe.EscapeLine(res.Owner), strings.Join(res.Administered, ", "))
	next := "expiryctl migrate"
	if res.Deployment.Named() {
		next += " --deployment " + string(res.Deployment)
	}
	fmt.Fprintf(opts.IO.Out, "next, as %s: %s\n", termsafe.EscapeLine(res.Owner), next)
	if res.OwnerCreateRole {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s still has CREATEROLE, with which it can grant itself any role: it needs it no more (ALTER ROLE %s NOCREATEROLE)\n",
			termsafe.EscapeLine(res.Owner), termsafe.EscapeLine(res.Owner))
	}
	return nil
}
