package commands

import (
	"context"
	"strconv"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
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
		// As in the full summary, the reservation database is asked while
		// the archive answers.
		gapCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		type gapAnswer struct {
			gap replay.HoldsGap
			err error
		}
		gaps := make(chan gapAnswer, 1)
		go func() {
			g, err := readHoldsAtSource(gapCtx, &once)
			gaps <- gapAnswer{g, err}
		}()
		signals, err := archive.Signals(ctx, opts.Window)
		if err != nil {
			return err
		}
		gap := <-gaps
		h := newHoldsAtSource(gap.gap, gap.err, signals.Overdue)
		u.Line = summaryLine(signals, h)
		return nil
	})
}

// summaryLine is the summary on one line, the answer to "is it getting
// worse?" first: the letters waiting for a decision, the overdue holds and
// the latest of them (and, apart, those failed for good), the holds past
// their deadline in the reservation database when the policy has a gap
// query (at_source, and unaccounted: those beyond the overdue letters; or
// at_source=unavailable, the full summary saying why), the arrival rate of
// the last 5 minutes and its trend against the hour, when the oldest
// waiting letter was dead-lettered, and the letters waiting per category,
// for every category the archive holds.
func summaryLine(signals deadletter.Signals, holds holdsAtSource) string {
	var (
		waiting int64
		oldest  *time.Time
	)
	for _, c := range signals.Categories {
		waiting += c.Count
		if c.OldestDeadLetteredAt != nil && (oldest == nil || c.OldestDeadLetteredAt.Before(*oldest)) {
			oldest = c.OldestDeadLetteredAt
		}
	}
	line := (&logfmt{}).add("waiting", waiting).add("overdue", signals.Overdue.Count)
	if late := signals.Overdue.LatenessMax; late != nil {
		line.add("late_max", late.Duration().Round(time.Second).String())
	}
	if n := signals.Overdue.Permanent; n > 0 {
		line.add("overdue_for_good", n)
	}
	switch {
	case !holds.Configured:
	case holds.PastDeadline == nil:
		line.add("at_source", "unavailable")
	default:
		line.add("at_source", *holds.PastDeadline)
		if n := deref(holds.Unaccounted); n > 0 {
			line.add("unaccounted", n)
		}
	}
	line.add("per_min_5m", strconv.FormatFloat(signals.Arrivals.Last5m.PerMinute, 'f', 1, 64)).
		add("trend", string(signals.Arrivals.FiveMinutesVsHour.Direction))
	if oldest != nil {
		line.add("oldest", oldest.UTC().Format(time.RFC3339))
	}
	for _, c := range signals.Categories {
		line.add(string(c.Category), c.Count)
	}
	return line.String()
}
