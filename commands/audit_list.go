package commands

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
)

// AuditListOptions holds what `expiryctl audit list` needs.
type AuditListOptions struct {
	IO       *IOStreams
	Reviewer func(context.Context) (service.AuditReviewer, error)
	Now      func() time.Time

	Since  string
	Until  string
	After  string
	Limit  int
	Output *outputFormat
	Filter audit.Filter
	Cursor *audit.Cursor
}

// NewCmdAuditList builds `expiryctl audit list`.
func NewCmdAuditList(f *Factory, runF func(context.Context, *AuditListOptions) error) *cobra.Command {
	opts := &AuditListOptions{IO: f.IO, Reviewer: f.AuditReviewer, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit rows, newest first",
		Long: `List audit rows, newest first, a page at a time.

When more rows match than --limit, the seq to continue from is printed on
stderr; pass it back with --after. To read the whole trail, or to hand it to
someone, use ` + "`expiryctl audit export`" + `: its files can be verified.

BUILD is the build of expiryctl that wrote the row (its version and commit),
as the client named it when it connected; empty for a row whose session
named none (the column shows when a row of the page names one). It is part
of the details, so the row's hash covers it.

-o csv writes one row per audit row (seq, at, actor, db_role, action,
target, outcome, details as JSON, prev_hash, hash, build); an export, unlike
it, can be verified.

Here --actor filters by actor. To name yourself for this command's own audit
row, set EXPIRYCTL_ACTOR.`,
		Example: `  expiryctl audit list
  expiryctl audit list --since 2h --action dlq.show
  expiryctl audit list --actor alice --limit 200 -o json
  expiryctl audit list --after 4812
  expiryctl audit list --since 24h --limit 10000 -o csv > trail.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.resolve(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditListRun(cmd.Context(), opts)
		},
	}
	addAuditFilterFlags(cmd, &opts.Since, &opts.Until, &opts.Filter)
	fl := cmd.Flags()
	fl.IntVarP(&opts.Limit, "limit", "n", 50, "rows per page (1 to 10000)")
	fl.StringVar(&opts.After, "after", "", "continue after this seq (printed by the previous page)")
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	return cmd
}

// resolve turns the flag strings into the typed filter, so that every flag
// error is reported before any connection is made.
func (opts *AuditListOptions) resolve() error {
	if err := resolveAuditTimes(opts.Since, opts.Until, opts.Now, &opts.Filter); err != nil {
		return err
	}
	if opts.Limit < 1 || opts.Limit > 10000 {
		return flagErrorf("invalid --limit %d: use 1 to 10000, or `expiryctl audit export` for everything", opts.Limit)
	}
	if opts.After != "" {
		c, err := audit.ParseCursor(opts.After)
		if err != nil {
			return &FlagError{Err: err}
		}
		opts.Cursor = &c
	}
	return nil
}

// fullCommit is a whole commit hash in a build's claim.
var fullCommit = regexp.MustCompile(`\bcommit ([0-9a-f]{12})[0-9a-f]{28}\b`)

// shortBuild is a build as a table shows it: the commit cut to 12 digits,
// as `expiryctl version` prints it.
func shortBuild(build string) string {
	return fullCommit.ReplaceAllString(build, "commit $1")
}

func auditListRun(ctx context.Context, opts *AuditListOptions) error {
	reviewer, err := opts.Reviewer(ctx)
	if err != nil {
		return err
	}
	page, err := reviewer.List(ctx, opts.Filter, opts.Cursor, opts.Limit)
	if err != nil {
		return err
	}

	switch opts.Output.value {
	case "json":
		rows := page.Rows
		if rows == nil {
			rows = []audit.Row{}
		}
		if err := writeJSON(opts.IO.Out, rows); err != nil {
			return err
		}
	case "csv":
		if err := writeCSV(opts.IO.Out, auditCSVHeaders, page.Rows, auditCSVCells); err != nil {
			return err
		}
	default:
		if len(page.Rows) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no audit rows match")
			return nil
		}
		// BUILD shows only on a page that has a row naming its build: a
		// trail written before builds were recorded keeps its width.
		showBuild := slices.ContainsFunc(page.Rows, func(r audit.Row) bool { return r.Build() != "" })
		headers := []string{"SEQ", "AT", "ACTOR", "DB-ROLE", "ACTION", "TARGET", "OUTCOME", "DETAILS"}
		// TARGET is what a row is looked up by (replay_request:7): it
		// gives way last, and is cut in the middle, keeping the id at its
		// end, never as `replay_r…`.
		giving := []string{"DETAILS", "DB-ROLE", "ACTOR", "TARGET"}
		if showBuild {
			headers = slices.Insert(headers, 7, "BUILD")
			giving = slices.Insert(giving, 1, "BUILD")
		}
		t := newTable(opts.IO, headers...).truncatable(giving...).keepEnds("TARGET")
		for _, r := range page.Rows {
			at := audit.FormatTime(r.At)
			if opts.IO.StdoutTTY {
				at = formatTime(opts.IO, r.At, opts.Now())
			}
			cells := []string{strconv.FormatInt(r.Seq, 10), at, r.Actor, r.DBRole, r.Action, r.Target, r.Outcome, string(r.Details)}
			if showBuild {
				cells = slices.Insert(cells, 7, shortBuild(r.Build()))
			}
			t.addRow(cells...)
		}
		if err := t.render(); err != nil {
			return err
		}
	}
	if page.Next != nil {
		fmt.Fprintf(opts.IO.ErrOut, "next page: --after %s\n", page.Next)
	}
	return nil
}
