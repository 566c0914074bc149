package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/store"
)

// NewCmdAccess builds `expiryctl access`.
func NewCmdAccess(f *Factory) *cobra.Command {
	var groups strings.Builder
	for _, g := range access.Groups() {
		fmt.Fprintf(&groups, "  %-19s %s\n", g.Name, g.May)
	}
	cmd := &cobra.Command{
		Use:   "access <command>",
		Short: "Manage which logins belong to which expiryctl group",
		Long: `Each person connects with their own PostgreSQL login; what the login may do
is its membership of expiryctl's groups, which ` + "`expiryctl access bootstrap`" + ` creates:

` + groups.String() + `
A named deployment's groups carry its name (expiryctl_NAME_operator, …): a
group may be given by its role alone (operator), and is then this database's
deployment's. No group writes a table directly: every change goes through the schema's
functions, which check the caller's login and write the audit row. Only the
schema owner grants and revokes; every change is audited.`,
		Example: `  # as the schema owner: alice requests and runs replays, bob approves them
  createuser alice && createuser bob
  expiryctl access grant alice expiryctl_operator
  expiryctl access grant bob approver      # the role alone: this deployment's group
  expiryctl access list`,
	}
	cmd.AddCommand(NewCmdAccessChange(f, true, nil), NewCmdAccessChange(f, false, nil), NewCmdAccessList(f, nil),
		NewCmdAccessBootstrap(f, nil))
	return cmd
}

// AccessChangeOptions holds what `expiryctl access grant|revoke` needs.
type AccessChangeOptions struct {
	IO     *IOStreams
	Access func(context.Context) (service.Access, error)
	Grant  bool
	Login  string
	Groups []string
}

// NewCmdAccessChange builds `expiryctl access grant` or `access revoke`.
func NewCmdAccessChange(f *Factory, grant bool, runF func(context.Context, *AccessChangeOptions) error) *cobra.Command {
	opts := &AccessChangeOptions{IO: f.IO, Access: f.Access, Grant: grant}
	verb, short, example := "grant", "Make a login a member of groups (schema owner only)",
		"  expiryctl access grant alice expiryctl_operator\n  expiryctl access grant bob expiryctl_approver expiryctl_auditor"
	if !grant {
		verb, short, example = "revoke", "End a login's membership of groups (schema owner only)",
			"  expiryctl access revoke alice expiryctl_operator"
	}
	// The roles alone complete in any deployment; the full names are the
	// unnamed deployment's.
	names := append([]string(nil), store.Roles...)
	for _, g := range access.Groups() {
		names = append(names, g.Name)
	}
	cmd := &cobra.Command{
		Use:     verb + " LOGIN GROUP...",
		Short:   short,
		Example: example,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return flagErrorf("access %s takes a login and one or more groups, e.g. `expiryctl access %s alice expiryctl_operator`", verb, verb)
			}
			if err := access.CheckGroups(args[1:]); err != nil {
				return &FlagError{Err: err}
			}
			opts.Login, opts.Groups = args[0], args[1:]
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return accessChangeRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func accessChangeRun(ctx context.Context, opts *AccessChangeOptions) error {
	svc, err := opts.Access(ctx)
	if err != nil {
		return err
	}
	if opts.Grant {
		err = svc.Grant(ctx, opts.Login, opts.Groups)
	} else {
		err = svc.Revoke(ctx, opts.Login, opts.Groups)
	}
	if err != nil {
		return err
	}
	done := "granted to"
	if !opts.Grant {
		done = "revoked from"
	}
	fmt.Fprintf(opts.IO.Out, "%s %s %s\n", strings.Join(opts.Groups, ", "), done, opts.Login)
	return nil
}

// AccessListOptions holds what `expiryctl access list` needs.
type AccessListOptions struct {
	IO     *IOStreams
	Access func(context.Context) (service.Access, error)
	Output *outputFormat
}

// NewCmdAccessList builds `expiryctl access list`.
func NewCmdAccessList(f *Factory, runF func(context.Context, *AccessListOptions) error) *cobra.Command {
	opts := &AccessListOptions{IO: f.IO, Access: f.Access}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the logins in each expiryctl group",
		Long: `List every login with the expiryctl groups it belongs to.

Beside the groups' members it lists every login that holds a way around the
rules (superuser, owner, createrole, pg_write_all_data, pg_read_all_data,
bypassrls, group_admin), for which governance is advisory.

-o csv writes one row per login (login, groups space-separated, superuser,
can_login, bypasses space-separated).`,
		Example: "  expiryctl access list\n  expiryctl access list -o json\n  expiryctl access list -o csv > members.csv",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return accessListRun(cmd.Context(), opts)
		},
	}
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	return cmd
}

func accessListRun(ctx context.Context, opts *AccessListOptions) error {
	svc, err := opts.Access(ctx)
	if err != nil {
		return err
	}
	members, err := svc.List(ctx)
	if err != nil {
		return err
	}
	switch opts.Output.value {
	case "json":
		return writeJSON(opts.IO.Out, members)
	case "csv":
		return writeCSV(opts.IO.Out, memberCSVHeaders, members, memberCSVCells)
	}
	t := newTable(opts.IO, "LOGIN", "GROUPS", "NOTE").truncatable("NOTE", "GROUPS")
	for _, m := range members {
		note := ""
		switch {
		case m.Superuser:
			note = "superuser: governance is advisory for this login"
		case len(m.Bypasses) > 0:
			note = strings.Join(m.Bypasses, ", ") + ": governance is advisory for this login"
		case !m.CanLogin:
			note = "cannot log in"
		}
		t.addRow(m.Login, strings.Join(m.Groups, ", "), note)
	}
	return t.render()
}
