package commands

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/termsafe"
)

// NewCmdPolicy builds `expiryctl policy`.
func NewCmdPolicy(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy <command>",
		Short: "Show or change the governance policy kept in the database",
		Long: `The policy lives in PostgreSQL, so that nobody can loosen it with a local
file: who may approve, how large and fast a replay may be, how long approvals
last, the default stop conditions, the identity mode, the eligibility query
and the retention window. Every change is audited with the values before and
after.`,
	}
	cmd.AddCommand(NewCmdPolicyShow(f, nil), NewCmdPolicySet(f, nil))
	return cmd
}

// PolicyShowOptions holds what `expiryctl policy show` needs.
type PolicyShowOptions struct {
	IO     *IOStreams
	Actor  func() string
	DB     func(context.Context) (*pgxpool.Pool, error)
	Output *outputFormat
}

// NewCmdPolicyShow builds `expiryctl policy show`.
func NewCmdPolicyShow(f *Factory, runF func(context.Context, *PolicyShowOptions) error) *cobra.Command {
	opts := &PolicyShowOptions{IO: f.IO, Actor: f.Actor, DB: f.DB}
	cmd := &cobra.Command{
		Use:     "show",
		Short:   "Show the policy",
		Example: "  expiryctl policy show\n  expiryctl policy show -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			ctx := cmd.Context()
			pool, err := opts.DB(ctx)
			if err != nil {
				return err
			}
			p, err := replay.LoadPolicy(ctx, pool)
			if err != nil {
				return err
			}
			if err := audit.Record(ctx, pool, audit.Entry{Actor: opts.Actor(), Action: "policy.show", Target: "policy"}); err != nil {
				return err
			}
			if opts.Output.value == "json" {
				return writeJSON(opts.IO.Out, p)
			}
			return renderPolicy(opts.IO, p)
		},
	}
	opts.Output = addOutputFlag(cmd, "table", "json")
	return cmd
}

func renderPolicy(streams *IOStreams, p replay.Policy) error {
	t := newTable(streams, "KEY", "VALUE")
	approvers := strings.Join(p.Approvers, ",")
	if approvers == "" {
		approvers = "(none: nobody can approve)"
	}
	t.addRow("approvers", approvers)
	t.addRow("max_cohort", fmt.Sprint(p.MaxCohort))
	t.addRow("max_rate", fmt.Sprintf("%g", p.MaxRate))
	t.addRow("approval_ttl", p.ApprovalTTL.String())
	t.addRow("stop_failure_ratio", fmt.Sprintf("%g", p.StopFailureRatio))
	t.addRow("stop_queue_depth", fmt.Sprint(p.StopQueueDepth))
	t.addRow("stop_redead_ratio", fmt.Sprintf("%g", p.StopRedeadRatio))
	t.addRow("canary_window", p.CanaryWindow.String())
	t.addRow("identity_mode", p.IdentityMode)
	t.addRow("eligibility_query", termsafe.EscapeLine(p.EligibilityQuery))
	t.addRow("retention", p.Retention.String())
	t.addRow("updated", p.UpdatedAt.UTC().Format(time.RFC3339)+" by "+p.UpdatedBy)
	return t.render()
}

// PolicySetOptions holds what `expiryctl policy set` needs.
type PolicySetOptions struct {
	IO      *IOStreams
	Actor   func() string
	DB      func(context.Context) (*pgxpool.Pool, error)
	Changes map[string]any
}

// NewCmdPolicySet builds `expiryctl policy set`.
func NewCmdPolicySet(f *Factory, runF func(context.Context, *PolicySetOptions) error) *cobra.Command {
	opts := &PolicySetOptions{IO: f.IO, Actor: f.Actor, DB: f.DB}
	keys := replay.PolicyKeys()
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var help strings.Builder
	for _, k := range names {
		fmt.Fprintf(&help, "  %-19s %s\n", k, keys[k])
	}
	cmd := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Change the policy (audited)",
		Long:  "Change one or more policy keys. Keys:\n\n" + help.String(),
		Example: `  expiryctl policy set approvers=bob,carol max_rate=50 approval_ttl=1h
  expiryctl policy set identity_mode=db-role
  expiryctl policy set eligibility_query="SELECT status = 'held', status FROM reservations.reservations WHERE id = \$1"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := replay.ParsePolicyChanges(args)
			if err != nil {
				return &FlagError{Err: err}
			}
			opts.Changes = changes
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			pool, err := opts.DB(cmd.Context())
			if err != nil {
				return err
			}
			p, err := replay.SetPolicy(cmd.Context(), pool, opts.Actor(), changes)
			if err != nil {
				return err
			}
			return renderPolicy(opts.IO, p)
		},
	}
	cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = n + "="
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}
