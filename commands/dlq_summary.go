package commands

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
)

// DLQSummaryOptions holds what `expiryctl dlq summary` needs.
type DLQSummaryOptions struct {
	IO      *IOStreams
	Archive func(context.Context) (service.Archive, error)
	Now     func() time.Time
	Output  *outputFormat

	// Watch is --watch; UnauditedArchive serves its redraws.
	Watch            *watchFlag
	UnauditedArchive func(context.Context) (service.Archive, error)
}

// NewCmdDLQSummary builds `expiryctl dlq summary`.
func NewCmdDLQSummary(f *Factory, runF func(context.Context, *DLQSummaryOptions) error) *cobra.Command {
	opts := &DLQSummaryOptions{IO: f.IO, Archive: f.Archive, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Count dead letters per reason category",
		Long: `Show, per reason category, how many letters wait for a decision (dead or in
a replay request), how old the oldest is, and which queues they came from.`,
		Example: `  expiryctl dlq summary
  expiryctl dlq summary -o json | jq '.[] | select(.count > 0)'
  expiryctl dlq summary --watch                    # redraw every 5s until Ctrl-C
  expiryctl dlq summary --watch=1m >> incident.log # piped, one line per update:
  # 2026-11-30T03:00:00Z waiting=42 oldest=2026-11-30T01:12:00Z transient-exhausted=40 validation=2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqSummaryRun(cmd.Context(), opts)
		},
	}
	opts.Output = addOutputFlag(cmd, "table", "json")
	opts.Watch, opts.UnauditedArchive = addWatchFlag(cmd, f), f.UnauditedArchive
	return cmd
}

func dlqSummaryRun(ctx context.Context, opts *DLQSummaryOptions) error {
	if opts.Watch.on() {
		return dlqSummaryWatch(ctx, opts)
	}
	archive, err := opts.Archive(ctx)
	if err != nil {
		return err
	}
	summary, err := archive.Summary(ctx)
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, summary)
	}
	t := newTable(opts.IO, "CATEGORY", "WAITING", "TOTAL", "OLDEST", "QUEUES")
	for _, s := range summary {
		oldest := "-"
		if s.OldestDeadLetteredAt != nil {
			oldest = formatTime(opts.IO, *s.OldestDeadLetteredAt, opts.Now())
		}
		t.addRow(string(s.Category), strconv.FormatInt(s.Count, 10), strconv.FormatInt(s.Total, 10), oldest, strings.Join(s.Queues, ","))
	}
	if len(summary) == 0 && opts.IO.StdoutTTY {
		_, err := opts.IO.ErrOut.Write([]byte("the archive is empty: capture a queue with `expiryctl dlq ingest --queue QUEUE`\n"))
		return err
	}
	return t.render()
}

// formatTime shows an age ("3h12m ago") to people and an exact time to pipes.
func formatTime(streams *IOStreams, t, now time.Time) string {
	if !streams.StdoutTTY {
		return t.UTC().Format(time.RFC3339)
	}
	age := now.Sub(t)
	switch {
	case age < 0:
		return t.UTC().Format("2006-01-02 15:04:05Z")
	case age < time.Minute:
		return strconv.Itoa(int(age.Seconds())) + "s ago"
	case age < time.Hour:
		return strconv.Itoa(int(age.Minutes())) + "m ago"
	case age < 48*time.Hour:
		return strconv.Itoa(int(age.Hours())) + "h" + strconv.Itoa(int(age.Minutes())%60) + "m ago"
	default:
		return strconv.Itoa(int(age.Hours()/24)) + "d ago"
	}
}
