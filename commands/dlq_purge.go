package commands

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
)

// DLQPurgeOptions holds what `expiryctl dlq purge` needs.
type DLQPurgeOptions struct {
	IO *IOStreams
	// Policy gives the default window; Retention redacts.
	Policy    func(context.Context) (service.Policy, error)
	Retention func(context.Context) (service.Retention, error)

	OlderThan string
	DryRun    bool
	Yes       bool
	Output    *outputFormat
	window    time.Duration
}

// NewCmdDLQPurge builds `expiryctl dlq purge`.
func NewCmdDLQPurge(f *Factory, runF func(context.Context, *DLQPurgeOptions) error) *cobra.Command {
	opts := &DLQPurgeOptions{IO: f.IO, Policy: f.Policy, Retention: f.Retention}
	cmd := &cobra.Command{
		Use:   "purge [--older-than DURATION] (--dry-run | --yes)",
		Short: "Redact payloads and headers past the retention window",
		Long: `Redact the payload and headers of dead letters captured longer ago than the
retention window, by the database's clock (the time a letter says it died is
its own claim, and never shortens its retention). Identity, category, error class, attempt history, the payload's sha256
and size, and the audit trail stay; nothing is deleted. A frozen cohort cannot
lose a payload, so an open replay or discard request holding such a letter is
voided (cancelled, audited) first.

The window defaults to the policy's retention (` + "`expiryctl policy show`" + `), kept
in the database rather than in a local file; a shorter one is refused (rule
retention). Purging needs expiryctl_operator or expiryctl_admin. Without --yes, purge asks on a
terminal and refuses otherwise.`,
		Example: `  expiryctl dlq purge --dry-run
  expiryctl dlq purge --older-than 30d --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.OlderThan != "" {
				d, err := parseWindow(opts.OlderThan)
				if err != nil {
					return err
				}
				opts.window = d
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqPurgeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.OlderThan, "older-than", "", "retention window, e.g. 30d or 720h (default: the policy's retention)")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "count what would be redacted, change nothing")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	opts.Output = addOutputFlag(cmd, "text", "json")
	return cmd
}

// parseWindow reads a duration with an optional day suffix ("30d").
func parseWindow(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, flagErrorf("invalid --older-than %q: use a positive duration such as 30d, 720h or 90m", s)
	}
	return d, nil
}

func dlqPurgeRun(ctx context.Context, opts *DLQPurgeOptions) error {
	retention, err := opts.Retention(ctx)
	if err != nil {
		return err
	}
	if opts.window == 0 {
		policy, err := opts.Policy(ctx)
		if err != nil {
			return err
		}
		pol, err := policy.Load(ctx)
		if err != nil {
			return err
		}
		opts.window = pol.Retention
	}
	purge := deadletter.PurgeOptions{OlderThan: opts.window, DryRun: opts.DryRun}
	preview, err := retention.Preview(ctx, opts.window)
	if err != nil {
		return err
	}
	if !opts.DryRun && preview.Redacted > 0 && !opts.Yes {
		if !opts.IO.StdoutTTY || !opts.IO.StderrTTY {
			return flagErrorf("purge would redact %s captured before %s and is not on a terminal to ask: add --yes (or --dry-run)",
				phrase.Count(preview.Redacted, "letter", "letters"), preview.Cutoff.Format(time.RFC3339))
		}
		fmt.Fprintf(opts.IO.ErrOut, "redact payloads and headers of %s captured before %s? [y/N] ",
			phrase.Count(preview.Redacted, "letter", "letters"), preview.Cutoff.Format(time.RFC3339))
		answer, _ := bufio.NewReader(opts.IO.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return fmt.Errorf("purge not confirmed: nothing was redacted: %w", context.Canceled)
		}
	}
	if opts.IO.StderrTTY && !opts.DryRun {
		purge.Progress = func(r deadletter.PurgeResult) {
			fmt.Fprintf(opts.IO.ErrOut, "\r\x1b[Kredacted %d of %d", r.Redacted, preview.Redacted)
		}
	}
	res, err := retention.Purge(ctx, purge)
	if opts.IO.StderrTTY && !opts.DryRun {
		fmt.Fprint(opts.IO.ErrOut, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, res)
	}
	verb := "redacted"
	if opts.DryRun {
		verb = "would redact"
	}
	fmt.Fprintf(opts.IO.Out, "%s %s captured before %s", verb, phrase.Count(res.Redacted, "letter", "letters"), res.Cutoff.Format(time.RFC3339))
	if res.InRequest > 0 {
		voided := "which the purge voided"
		if opts.DryRun {
			voided = "which the purge would void"
		}
		fmt.Fprintf(opts.IO.Out, "; %d of them held by open requests, %s", res.InRequest, voided)
	}
	fmt.Fprintln(opts.IO.Out)
	return nil
}
