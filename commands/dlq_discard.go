package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/replay"
)

// DLQDiscardOptions holds what `expiryctl dlq discard` needs.
type DLQDiscardOptions struct {
	IO        *IOStreams
	Requests  func(context.Context) (service.Requests, error)
	Now       func() time.Time
	Selection selectionFlags
	Why       string
	Output    *outputFormat
	request   replay.NewRequest
}

// NewCmdDLQDiscard builds `expiryctl dlq discard`.
func NewCmdDLQDiscard(f *Factory, runF func(context.Context, *DLQDiscardOptions) error) *cobra.Command {
	opts := &DLQDiscardOptions{IO: f.IO, Requests: f.Requests, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "discard (--id ID... | FILTER --max N) --why TEXT",
		Short: "Ask to mark letters as never to be retried (approval required)",
		Long: `Create a discard request. It goes through the same approval as a replay; once
approved and run (` + "`expiryctl replay run REQ`" + `), its letters are marked
"discarded" and excluded from any replay. Nothing is deleted.`,
		Example: `  expiryctl dlq discard --reason conflict --max 100 --why "INC-4211: versions moved on, nothing to expire"
  expiryctl dlq discard --id 42 --id 43 --why "test data from the load test"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := opts.Selection.resolve(opts.Now())
			if err != nil {
				return err
			}
			if strings.TrimSpace(opts.Why) == "" {
				return flagErrorf("--why is required: name the incident or ticket, e.g. --why INC-4211")
			}
			opts.request = replay.NewRequest{Kind: replay.KindDiscard, Selection: sel, Why: opts.Why}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqDiscardRun(cmd.Context(), opts)
		},
	}
	opts.Selection.register(cmd)
	cmd.Flags().StringVar(&opts.Why, "why", "", "the incident or ticket (required)")
	opts.Output = addOutputFlag(cmd, "table", "json")
	return cmd
}

func dlqDiscardRun(ctx context.Context, opts *DLQDiscardOptions) error {
	svc, err := opts.Requests(ctx)
	if err != nil {
		return err
	}
	created, err := svc.Create(ctx, opts.request)
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, created.Request)
	}
	r := created.Request
	fmt.Fprintf(opts.IO.Out, "discard request %d is %s: %s\n", r.ID, r.Status, phrase.Count(r.Items, "letter", "letters"))
	fmt.Fprintf(opts.IO.ErrOut, "next: ask an approver to review it with `expiryctl replay show %d` and `expiryctl replay approve %d`, then `expiryctl replay run %d`\n", r.ID, r.ID, r.ID)
	return nil
}
