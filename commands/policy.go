package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// NewCmdPolicy builds `expiryctl policy`.
func NewCmdPolicy(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy <command>",
		Short: "Show or change the governance policy kept in the database",
		Long: `The policy lives in PostgreSQL, so that nobody can loosen it with a local
file or with psql: who may approve, how large and fast a replay may be, how
long approvals last, the default stop conditions, the identity mode, the
eligibility query and the retention window.

A change is under four-eyes: ` + "`policy set`" + ` by a member of expiryctl_admin records a
proposal, and it takes effect only when a different admin's login runs
` + "`policy approve ID`" + `. The schema owner sets the first policy directly. Every
change is audited with the values before and after.`,
		Example: `  # see the policy and the proposals waiting for a second admin
  expiryctl policy show
  # as dana (expiryctl_admin): propose who may approve, and a lower rate ceiling
  expiryctl policy set approvers=bob,carol max_rate=20 --why "INC-12: payments asked for less load"
  # as erin, another admin: apply it
  expiryctl policy approve 3 --why "agreed in the change review"`,
	}
	cmd.AddCommand(NewCmdPolicyShow(f, nil), NewCmdPolicySet(f, nil),
		NewCmdPolicyReview(f, true, nil), NewCmdPolicyReview(f, false, nil))
	return cmd
}

// PolicyShowOptions holds what `expiryctl policy show` needs.
type PolicyShowOptions struct {
	IO     *IOStreams
	Policy func(context.Context) (service.Policy, error)
	Output *outputFormat
}

// NewCmdPolicyShow builds `expiryctl policy show`.
func NewCmdPolicyShow(f *Factory, runF func(context.Context, *PolicyShowOptions) error) *cobra.Command {
	opts := &PolicyShowOptions{IO: f.IO, Policy: f.Policy}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the policy",
		Long: `Show the policy and the changes proposed to it that wait for a second admin.

Durations read as ` + "`policy set`" + ` takes them (1h, 30s, 90d); -o json
carries them in seconds, under names that say so (approval_ttl_seconds,
canary_window_seconds, outcome_window_seconds, retention_seconds).
-o csv lists the pending changes, one row each (id, proposed_by,
proposed_db_role, proposed_at, changes as KEY=VALUE space-separated, why):
the policy itself is one record, in the table or -o json.`,
		Example: "  expiryctl policy show\n  expiryctl policy show -o json | jq .approval_ttl_seconds\n  expiryctl policy show -o csv   # the pending changes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return policyShowRun(cmd.Context(), opts)
		},
	}
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	return cmd
}

func policyShowRun(ctx context.Context, opts *PolicyShowOptions) error {
	policy, err := opts.Policy(ctx)
	if err != nil {
		return err
	}
	p, pending, err := policy.Show(ctx)
	if err != nil {
		return err
	}
	if opts.Output.value == "csv" {
		return writeCSV(opts.IO.Out, policyChangeCSVHeaders, pending, policyChangeCSVCells)
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, policyReport{Policy: p, Pending: pending})
	}
	if err := renderPolicy(opts.IO, p); err != nil {
		return err
	}
	return renderPendingChanges(opts.IO, pending)
}

// policyReport is policy show's JSON: the policy's fields, then
// pending_changes. replay.Policy writes its own JSON (durations in
// seconds), which a struct embedding it would take over whole, pending
// changes lost: so the changes are added to the policy's object.
type policyReport struct {
	Policy  replay.Policy
	Pending []replay.PolicyChange
}

func (r policyReport) MarshalJSON() ([]byte, error) {
	policy, err := json.Marshal(r.Policy)
	if err != nil {
		return nil, err
	}
	changes, err := json.Marshal(r.Pending)
	if err != nil {
		return nil, err
	}
	// The policy is an object with fields: its closing brace makes way
	// for one more.
	doc := append(policy[:len(policy)-1:len(policy)-1], `,"pending_changes":`...)
	return append(append(doc, changes...), '}'), nil
}

func renderPolicy(streams *IOStreams, p replay.Policy) error {
	t := newTable(streams, "KEY", "VALUE").truncatable("VALUE")
	approvers := strings.Join(p.Approvers, ",")
	if approvers == "" {
		approvers = "(any member of expiryctl_approver)"
	}
	t.addRow("approvers", approvers)
	t.addRow("max_cohort", fmt.Sprint(p.MaxCohort))
	t.addRow("max_rate", fmt.Sprintf("%g", p.MaxRate))
	t.addRow("approval_ttl", phrase.Duration(p.ApprovalTTL))
	t.addRow("stop_failure_ratio", fmt.Sprintf("%g", p.StopFailureRatio))
	t.addRow("stop_queue_depth", fmt.Sprint(p.StopQueueDepth))
	t.addRow("stop_redead_ratio", fmt.Sprintf("%g", p.StopRedeadRatio))
	t.addRow("canary_window", phrase.Duration(p.CanaryWindow))
	t.addRow("identity_mode", p.IdentityMode)
	t.addRow("eligibility_query", termsafe.EscapeLine(p.EligibilityQuery))
	t.addRow("retention", phrase.Duration(p.Retention))
	t.addRow("outcome_query", termsafe.EscapeLine(p.OutcomeQuery))
	t.addRow("gap_query", termsafe.EscapeLine(p.GapQuery))
	t.addRow("outcome_window", phrase.Duration(p.OutcomeWindow))
	t.addRow("stop_unsettled_ratio", fmt.Sprintf("%g", p.StopUnsettledRatio))
	t.addRow("stop_conflict_ratio", fmt.Sprintf("%g", p.StopConflictRatio))
	t.addRow("signed_approvals", strconv.FormatBool(p.SignedApprovals))
	tables := slices.Sorted(maps.Keys(p.JobTables))
	for i := range tables {
		tables[i] = termsafe.EscapeLine(tables[i])
	}
	if len(tables) == 0 {
		tables = []string{"(none: no jobs table can be captured)"}
	}
	t.addRow("job_tables", strings.Join(tables, ", "))
	t.addRow("updated", p.UpdatedAt.UTC().Format(time.RFC3339)+" by "+p.UpdatedBy)
	return t.render()
}

// PolicySetOptions holds what `expiryctl policy set` needs.
type PolicySetOptions struct {
	IO      *IOStreams
	Policy  func(context.Context) (service.Policy, error)
	Changes map[string]any
	Why     string
	// Template is --template: a named set of changes, before KEY=VALUE.
	Template string
}

// NewCmdPolicySet builds `expiryctl policy set`.
func NewCmdPolicySet(f *Factory, runF func(context.Context, *PolicySetOptions) error) *cobra.Command {
	opts := &PolicySetOptions{IO: f.IO, Policy: f.Policy}
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
		Use:   "set (KEY=VALUE... | --template NAME [KEY=VALUE...])",
		Short: "Propose a policy change (a second admin approves it)",
		Long: "Propose a change of one or more policy keys. It takes effect when a different\n" +
			"admin runs `expiryctl policy approve ID`; the schema owner's change applies at once.\n\n" +
			"--template reservations proposes the eligibility query, outcome query and\n" +
			"outcome window for the reservation shape of docs/governance.md (tables\n" +
			"reservations and processed_jobs in schema reservations; reservations:SCHEMA\n" +
			"for another schema): runs then skip reservations no longer held at their\n" +
			"job's version and watch each replayed one expire, against the database of\n" +
			"`replay run --outcome-url` (a read-only login). KEY=VALUE after it override\n" +
			"the template's.\n\nKeys:\n\n" + help.String(),
		Example: `  expiryctl policy set approvers=bob,carol max_rate=50 approval_ttl=1h
  expiryctl policy set identity_mode=db-role
  expiryctl policy set --template reservations --why "INC-4211: watch outcomes by default"
  expiryctl policy set --template reservations:booking outcome_window=10m --why "holds tolerate 10 minutes"
  expiryctl policy set eligibility_query="SELECT status = 'held', status FROM reservations.reservations WHERE id = \$1"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			changes := map[string]any{}
			if opts.Template != "" {
				var err error
				if changes, err = replay.TemplateChanges(opts.Template); err != nil {
					return &FlagError{Err: err}
				}
			}
			if len(args) > 0 || opts.Template == "" {
				given, err := replay.ParsePolicyChanges(args)
				if err != nil {
					return &FlagError{Err: err}
				}
				maps.Copy(changes, given)
			}
			opts.Changes = changes
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return policySetRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Why, "why", "", "why the policy should change, shown to the approving admin")
	cmd.Flags().StringVar(&opts.Template, "template", "", "propose a known policy: reservations, or reservations:SCHEMA")
	_ = cmd.RegisterFlagCompletionFunc("template", cobra.FixedCompletions([]string{replay.ReservationsTemplate}, cobra.ShellCompDirectiveNoFileComp))
	cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = n + "="
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}

func policySetRun(ctx context.Context, opts *PolicySetOptions) error {
	policy, err := opts.Policy(ctx)
	if err != nil {
		return err
	}
	res, err := policy.Set(ctx, opts.Changes, opts.Why)
	if err != nil {
		return err
	}
	if !res.Applied {
		fmt.Fprintf(opts.IO.Out, "policy change %d proposed\n", res.ChangeID)
		fmt.Fprintf(opts.IO.ErrOut, "next: a different admin approves it with `expiryctl policy approve %d` (nothing changed yet)\n", res.ChangeID)
		return nil
	}
	fmt.Fprintln(opts.IO.ErrOut, "applied at once: you are the schema owner")
	return renderPolicy(opts.IO, res.Policy)
}

func renderPendingChanges(streams *IOStreams, pending []replay.PolicyChange) error {
	if len(pending) == 0 {
		return nil
	}
	fmt.Fprintln(streams.Out)
	t := newTable(streams, "CHANGE", "PROPOSED BY", "AT", "CHANGES", "WHY").truncatable("WHY", "CHANGES", "PROPOSED BY")
	for _, c := range pending {
		t.addRow(strconv.FormatInt(c.ID, 10), c.ProposedBy+" ("+c.ProposedDBRole+")", c.ProposedAt.UTC().Format(time.RFC3339),
			policyChangesText(c), c.Why)
	}
	return t.render()
}

// PolicyReviewOptions holds what `expiryctl policy approve|reject` needs.
type PolicyReviewOptions struct {
	IO      *IOStreams
	Policy  func(context.Context) (service.Policy, error)
	Approve bool
	ID      int64
	Why     string
}

// NewCmdPolicyReview builds `expiryctl policy approve` or `policy reject`.
func NewCmdPolicyReview(f *Factory, approve bool, runF func(context.Context, *PolicyReviewOptions) error) *cobra.Command {
	opts := &PolicyReviewOptions{IO: f.IO, Policy: f.Policy, Approve: approve}
	verb, short := "approve", "Apply a proposed policy change (as an admin who did not propose it)"
	if !approve {
		verb, short = "reject", "Drop a proposed policy change"
	}
	cmd := &cobra.Command{
		Use:   verb + " CHANGE",
		Short: short,
		Long: `Review a policy change proposed with ` + "`policy set`" + `; ` + "`policy show`" + ` lists them.
The database refuses a review by the login that proposed it (four-eyes), and
by anyone outside expiryctl_admin.`,
		Example: fmt.Sprintf("  expiryctl policy show\n  expiryctl policy %s 3 --why %q", verb, "agreed in the change review"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("policy %s takes one change id, e.g. `expiryctl policy %s 3` (`expiryctl policy show` lists them)", verb, verb)
			}
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return flagErrorf("invalid change id %q: use the number `expiryctl policy show` lists", args[0])
			}
			opts.ID = id
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !approve && strings.TrimSpace(opts.Why) == "" {
				return flagErrorf("--why is required to reject: say why the policy should stay")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return policyReviewRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Why, "why", "", "your reason, kept in the audit trail")
	return cmd
}

func policyReviewRun(ctx context.Context, opts *PolicyReviewOptions) error {
	policy, err := opts.Policy(ctx)
	if err != nil {
		return err
	}
	p, err := policy.Review(ctx, opts.ID, opts.Approve, opts.Why)
	if err != nil {
		return err
	}
	if !opts.Approve {
		fmt.Fprintf(opts.IO.Out, "policy change %d rejected: the policy is unchanged\n", opts.ID)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "policy change %d applied\n", opts.ID)
	return renderPolicy(opts.IO, p)
}
