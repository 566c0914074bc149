package commands

import (
	"context"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
)

// dlqSummaryWatch is `dlq summary --watch`. On a terminal and with -o json
// each update is the summary exactly as the command prints it once, read
// through the audited archive the first time and the unaudited one after;
// piped, it is summaryLine.
func dlqSummaryWatch(ctx context.Context, opts *DLQSummaryOptions) error {
	archives := &watchServices[service.Archive]{audited: opts.Archive, unaudited: opts.UnauditedArchive}
	return opts.Watch.run(ctx, opts.IO, "dlq summary", opts.Output.value == "json", func(ctx context.Context, u *watchUpdate) error {
		once := *opts
		once.IO, once.Watch = u.IO, nil
		once.Archive = func(ctx context.Context) (service.Archive, error) { return archives.get(ctx, u.Redraw) }
		if !u.OneLine {
			return dlqSummaryRun(ctx, &once)
		}
		archive, err := once.Archive(ctx)
		if err != nil {
			return err
		}
		summary, err := archive.Summary(ctx)
		if err != nil {
			return err
		}
		u.Line = summaryLine(summary)
		return nil
	})
}

// summaryLine is the summary on one line: the letters waiting for a
// decision, when the oldest of them was dead-lettered, and the letters
// waiting per category, for every category the archive holds.
func summaryLine(summary []deadletter.CategorySummary) string {
	var (
		waiting int64
		oldest  *time.Time
	)
	for _, s := range summary {
		waiting += s.Count
		if s.OldestDeadLetteredAt != nil && (oldest == nil || s.OldestDeadLetteredAt.Before(*oldest)) {
			oldest = s.OldestDeadLetteredAt
		}
	}
	line := (&logfmt{}).add("waiting", waiting)
	if oldest != nil {
		line.add("oldest", oldest.UTC().Format(time.RFC3339))
	}
	for _, s := range summary {
		line.add(string(s.Category), s.Count)
	}
	return line.String()
}
