package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/internal/view/letterview"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// DLQSummaryOptions holds what `expiryctl dlq summary` needs.
type DLQSummaryOptions struct {
	IO         *IOStreams
	Archive    func(context.Context) (service.Archive, error)
	LiveQueues func(context.Context) (service.LiveQueues, error)
	// HoldsGap reads the holds past their deadline in the reservation
	// database (the policy's gap query, on --outcome-url).
	HoldsGap func(context.Context) (service.HoldsGap, error)
	Now      func() time.Time

	Since     string
	Until     string
	WorkQueue string
	Output    *outputFormat
	// Window is what --since and --until resolve to.
	Window deadletter.SignalsOptions

	// Watch is --watch; UnauditedArchive serves its redraws.
	Watch            *watchFlag
	UnauditedArchive func(context.Context) (service.Archive, error)
}

// NewCmdDLQSummary builds `expiryctl dlq summary`.
func NewCmdDLQSummary(f *Factory, runF func(context.Context, *DLQSummaryOptions) error) *cobra.Command {
	opts := &DLQSummaryOptions{IO: f.IO, Archive: f.Archive, LiveQueues: f.LiveQueues, HoldsGap: f.HoldsGap, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Say whether it is getting worse: arrival rates, overdue holds, live queues, counts by reason",
		Long: `Answer "is it getting worse?" from the archive and the broker, in one
snapshot of the database and by its clock:

  arrivals      letters dead-lettered in the last 5 minutes, hour and 24 hours,
                per minute, overall and per category, and the trends: the 5-minute
                rate against the hour's, the hour's against the 24 hours'
                (rising at 1.5 times or more, falling at 1/1.5 or less)
  overdue       waiting letters (dead or in a request: not yet replayed or
                discarded) past their due_at that a retry can fix: how many,
                and the p50, p99 and maximum lateness (nearest rank); letters
                without a due_at are not counted
  for good      the overdue letters of the categories no retry fixes
                (conflict, validation, malformed, not-found), apart: they page
                nobody
  at source     the holds past their deadline in the reservation database
                itself, by the policy's gap_query on --outcome-url (a
                read-only login): those no captured letter speaks for too
                (lost before a dead-letter queue, acked before commit); when
                the database cannot answer the summary says so and shows the
                rest
  categories    per reason category, the letters waiting and in all, the
                attempts the waiting ones went through (min/p50/max), the
                oldest waiting and the queues they came from
  error classes the same per error class, most waiting first
  back after    letters that died again after a replay, per request (the 20
  replay        latest requests): all of them and those still waiting;
                ` + "`dlq list --request N`" + ` lists them
  live queues   from RabbitMQ's management API, for the work queue, its retry
                queues and its dead-letter queue: scheduled (in retry queues),
                ready and in flight (work queue), isolated (in the DLQ, not yet
                captured); when the API cannot be read the summary says so and
                shows the rest

--since and --until count only the letters dead-lettered in that window (the
categories, classes and overdue holds); the arrival windows always end at
--until, or now when it is unset or later, and --since does not shorten them.
Unbounded, every number comes from tallies and indexes: the summary costs
about the same on a million letters as on ten thousand. A bounded summary
reads the letters of its window.

-o json carries all of it, durations in seconds: at, since, until,
arrivals_end, arrivals {last_5m, last_1h, last_24h {window_seconds, letters,
per_minute}, trend_5m_vs_1h, trend_1h_vs_24h {direction, ratio}}, overdue
{count, oldest_due_at, lateness_p50_seconds, lateness_p99_seconds,
lateness_max_seconds, permanent, by_category [{category, permanent, count,
oldest_due_at, lateness_max_seconds}]}, holds_at_source {configured,
unavailable, past_deadline, oldest_deadline, oldest_late_seconds,
unaccounted}, categories [{reason_category, count (waiting), total,
oldest_dead_lettered_at, queues, arrivals, attempts {min, p50, max}}],
error_classes [{error_class, reason_categories, count, total, attempts}],
redead_by_request [{request_id, letters, waiting, last_dead_lettered_at}],
live_queues {work_queue, unavailable, scheduled, ready, in_flight, isolated,
queues [{name, role, ready, unacked, consumers, publish_rate, deliver_rate,
ack_rate, head_age_seconds}]}.

-o csv writes the categories, one row each (reason_category, count
(waiting), total, oldest_dead_lettered_at, per_minute_5m, trend_5m_vs_1h,
per_minute_1h, per_minute_24h, attempts_min, attempts_p50, attempts_max,
queues space-separated): the rest of the summary is not a list.`,
		Example: `  expiryctl dlq summary
  expiryctl dlq summary --since 2h
  expiryctl dlq summary --outcome-url "postgres://expiryctl_ro@reservations-db:5432/reservations"
  expiryctl dlq summary -o json | jq '.overdue, .arrivals.trend_5m_vs_1h'
  expiryctl dlq summary -o csv > categories.csv
  expiryctl dlq summary --watch                    # redraw every 5s until Ctrl-C
  expiryctl dlq summary --watch=1m >> incident.log # piped, one line per update:
  # 2026-11-30T03:00:00Z waiting=42 overdue=40 late_max=1h32m per_min_5m=3.2 trend=rising transient-exhausted=40 validation=2
  # (with a gap query, after overdue: at_source=N and unaccounted=M, or at_source=unavailable)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.resolve(); err != nil {
				return err
			}
			queue, err := f.queueName(opts.WorkQueue)
			if err != nil {
				return err
			}
			opts.WorkQueue = queue
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqSummaryRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Since, "since", "", "count only letters dead-lettered at or after this time (RFC 3339, date, or duration ago)")
	fl.StringVar(&opts.Until, "until", "", "count only letters dead-lettered before this time; the arrival windows end here")
	fl.StringVar(&f.OutcomeURLFlag, "outcome-url", "",
		"the reservation database the policy's gap_query reads, a read-only login (or EXPIRYCTL_OUTCOME_URL; default: expiryctl's own database)")
	// Not --queue: on dlq list and dlq ingest that names a dead-letter queue.
	fl.StringVar(&opts.WorkQueue, "work-queue", worker.NewTopology("").Queue,
		`the work queue whose retry queues ("<work-queue>.retry.<ms>") and DLQ ("<work-queue>.dlq") are shown; a job store's queue, named by a connection of the configuration (river://CONNECTION/QUEUE, bullmq://CONNECTION/PREFIX/QUEUE), shows its jobs by state`)
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	opts.Watch, opts.UnauditedArchive = addWatchFlag(cmd, f), f.UnauditedArchive
	return cmd
}

func (o *DLQSummaryOptions) resolve() error {
	now := o.Now()
	var err error
	if o.Since != "" {
		if o.Window.Since, err = parseTimeFlag("since", o.Since, now); err != nil {
			return err
		}
	}
	if o.Until != "" {
		if o.Window.Until, err = parseTimeFlag("until", o.Until, now); err != nil {
			return err
		}
	}
	if !o.Window.Since.IsZero() && !o.Window.Until.IsZero() && !o.Window.Since.Before(o.Window.Until) {
		return flagErrorf("--since %s is not before --until %s: the window would be empty", o.Since, o.Until)
	}
	if o.Watch.on() && o.Output.value == "csv" {
		return flagErrorf("--watch shows the summary or, with -o json, one document per update: drop -o csv, or --watch")
	}
	if strings.TrimSpace(o.WorkQueue) == "" {
		return flagErrorf("--work-queue must name a queue (the default is %s)", worker.NewTopology("").Queue)
	}
	return nil
}

// summaryReport is what `dlq summary` shows: the archive's signals, the
// live queues' states and the holds past their deadline at their source.
type summaryReport struct {
	deadletter.Signals
	LiveQueues liveQueues    `json:"live_queues"`
	Holds      holdsAtSource `json:"holds_at_source"`
}

// holdsAtSource is what the reservation database itself says of its holds
// past their deadline (the policy's gap query), beside the archive's
// overdue letters: Unaccounted are the holds past their deadline beyond
// the archive's overdue letters whose holds may still be held (all but
// conflict and not-found: deadletter.Overdue.StillHeld), which no captured
// letter can speak for (lost before a dead-letter queue, acked before
// commit, or not captured yet). The counts are null when the query was not run: Configured false
// (the policy sets none) or Unavailable saying why it failed.
type holdsAtSource struct {
	Configured        bool                `json:"configured"`
	Unavailable       string              `json:"unavailable,omitempty"`
	PastDeadline      *int64              `json:"past_deadline"`
	OldestDeadline    *time.Time          `json:"oldest_deadline"`
	OldestLateSeconds *deadletter.Seconds `json:"oldest_late_seconds"`
	Unaccounted       *int64              `json:"unaccounted"`
}

// readHoldsAtSource runs the gap query. Neither a policy without one nor
// a reservation database that cannot answer is the summary's failure: it
// says what is missing and shows the rest.
func readHoldsAtSource(ctx context.Context, opts *DLQSummaryOptions) (replay.HoldsGap, error) {
	if opts.HoldsGap == nil {
		return replay.HoldsGap{}, replay.ErrNoGapQuery
	}
	read, err := opts.HoldsGap(ctx)
	if err != nil {
		return replay.HoldsGap{}, err
	}
	return read(ctx)
}

// newHoldsAtSource puts the gap query's answer beside the archive's
// overdue letters.
func newHoldsAtSource(g replay.HoldsGap, err error, overdue deadletter.Overdue) holdsAtSource {
	switch {
	case errors.Is(err, replay.ErrNoGapQuery):
		return holdsAtSource{}
	case err != nil:
		return holdsAtSource{Configured: true, Unavailable: dsn.RedactText(err.Error())}
	}
	h := holdsAtSource{Configured: true, PastDeadline: &g.PastDeadline, OldestDeadline: g.OldestDeadline}
	if g.OldestDeadline != nil {
		late := deadletter.Seconds(g.OldestLate())
		h.OldestLateSeconds = &late
	}
	unaccounted := g.Unaccounted(overdue.StillHeld())
	h.Unaccounted = &unaccounted
	return h
}

// liveQueues are the live states of a work queue's topology, as distinct
// states of work: scheduled (waiting out a retry backoff), ready, in
// flight, isolated (in the DLQ, not yet captured). The totals are null
// when the broker could not be read, and Unavailable says why.
type liveQueues struct {
	WorkQueue   string      `json:"work_queue"`
	Unavailable string      `json:"unavailable,omitempty"`
	Note        string      `json:"note,omitempty"`
	Scheduled   *int64      `json:"scheduled"`
	Ready       *int64      `json:"ready"`
	InFlight    *int64      `json:"in_flight"`
	Isolated    *int64      `json:"isolated"`
	Consumers   *int        `json:"consumers"`
	Queues      []queueLine `json:"queues"`
}

// queueLine is deadletter.QueueState with its head age in seconds, as every
// duration of the summary's JSON is.
type queueLine struct {
	Name    string               `json:"name"`
	Role    deadletter.QueueRole `json:"role"`
	Ready   int64                `json:"ready"`
	Unacked int64                `json:"unacked"`
	// Consumers is null where the system shows nobody consuming its
	// queues.
	Consumers      *int                `json:"consumers"`
	PublishRate    *float64            `json:"publish_rate"`
	DeliverRate    *float64            `json:"deliver_rate"`
	AckRate        *float64            `json:"ack_rate"`
	HeadAgeSeconds *deadletter.Seconds `json:"head_age_seconds"`
	// HeadAgeSource says where the age comes from: the broker's head
	// timestamp, or, for a quorum queue, which reports none, an estimate
	// from its ready messages over its ack rate.
	HeadAgeSource string `json:"head_age_source,omitempty"`
	// ClassicVersion is a classic queue's storage version, where the
	// broker reports one.
	ClassicVersion int `json:"classic_queue_version,omitempty"`
	// Advice is what to change about the queue, when anything.
	Advice string `json:"advice,omitempty"`
}

// newLiveQueues sorts a report's queues into the states of work.
func newLiveQueues(workQueue string, r deadletter.QueueReport) liveQueues {
	l := liveQueues{WorkQueue: workQueue, Unavailable: r.Unavailable, Note: r.Note, Queues: []queueLine{}}
	if r.Unavailable != "" {
		return l
	}
	for _, q := range r.Queues {
		line := queueLine{Name: q.Name, Role: q.Role, Ready: q.Ready, Unacked: q.Unacked,
			PublishRate: q.PublishRate, DeliverRate: q.DeliverRate, AckRate: q.AckRate, ClassicVersion: q.ClassicVersion}
		if !q.ConsumersUnseen {
			line.Consumers = &q.Consumers
		}
		if q.PagesUnderCapture() {
			line.Advice = queueVersionAdvice(q.Name)
		}
		if q.HeadAge != nil {
			age := deadletter.Seconds(*q.HeadAge)
			line.HeadAgeSeconds = &age
			line.HeadAgeSource = "head_message_timestamp"
			if q.HeadAgeEstimated {
				line.HeadAgeSource = "estimated: ready / ack rate (no head timestamp)"
			}
		}
		l.Queues = append(l.Queues, line)
	}
	s := r.States()
	l.Scheduled, l.Ready, l.InFlight, l.Isolated = &s.Scheduled, &s.Ready, &s.InFlight, &s.Isolated
	if !s.ConsumersUnseen {
		l.Consumers = &s.Consumers
	}
	return l
}

// readLiveQueues reads the topology's states. A broker that cannot be
// read is not the summary's failure: it says what is missing instead.
func readLiveQueues(ctx context.Context, opts *DLQSummaryOptions) liveQueues {
	var report deadletter.QueueReport
	lq, err := opts.LiveQueues(ctx)
	if err == nil {
		report, err = lq.Topology(ctx, opts.WorkQueue)
	}
	if err != nil {
		report = deadletter.QueueReport{Unavailable: dsn.RedactText(err.Error())}
	}
	return newLiveQueues(opts.WorkQueue, report)
}

func dlqSummaryRun(ctx context.Context, opts *DLQSummaryOptions) error {
	if opts.Watch.on() {
		return dlqSummaryWatch(ctx, opts)
	}
	archive, err := opts.Archive(ctx)
	if err != nil {
		return err
	}
	// The broker is asked while the database answers: the slower of the
	// two sets the summary's latency, not their sum.
	queuesCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := make(chan liveQueues, 1)
	go func() { queues <- readLiveQueues(queuesCtx, opts) }()
	type gapAnswer struct {
		gap replay.HoldsGap
		err error
	}
	gaps := make(chan gapAnswer, 1)
	go func() {
		g, err := readHoldsAtSource(queuesCtx, opts)
		gaps <- gapAnswer{g, err}
	}()
	signals, err := archive.Signals(ctx, opts.Window)
	if err != nil {
		return err
	}
	gap := <-gaps
	report := summaryReport{Signals: signals, LiveQueues: <-queues, Holds: newHoldsAtSource(gap.gap, gap.err, signals.Overdue)}
	switch opts.Output.value {
	case "json":
		return writeJSON(opts.IO.Out, report)
	case "csv":
		return writeCSV(opts.IO.Out, categoryCSVHeaders, report.Categories, categoryCSVCells)
	}
	if err := renderSummary(opts.IO, report); err != nil {
		return err
	}
	if len(report.Categories) == 0 && opts.IO.StdoutTTY {
		_, err := io.WriteString(opts.IO.ErrOut, "the archive is empty: capture a queue with `expiryctl dlq ingest --queue QUEUE`\n")
		return err
	}
	return nil
}

// maxClassesShown bounds the error classes a terminal shows: the rest are
// the long tail, and -o json lists them.
const maxClassesShown = 10

// renderSummary writes the summary for people on a terminal, worst news
// first, and as tab-separated tables, one after another, for a pipe.
func renderSummary(streams *IOStreams, r summaryReport) error {
	w := streams.Out
	if streams.StdoutTTY {
		if err := writeHeadlines(streams, r); err != nil {
			return err
		}
	} else {
		if err := arrivalsTable(streams, r.Arrivals).render(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := overdueTable(streams, r.Overdue).render(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := holdsTable(streams, r.Holds).render(); err != nil {
			return err
		}
	}
	if len(r.Categories) > 0 {
		fmt.Fprintln(w)
		if err := categoryTable(streams, r).render(); err != nil {
			return err
		}
	}
	if len(r.ErrorClasses) > 0 {
		fmt.Fprintln(w)
		if err := classTable(streams, r.ErrorClasses).render(); err != nil {
			return err
		}
		if hidden := len(r.ErrorClasses) - maxClassesShown; streams.StdoutTTY && hidden > 0 {
			fmt.Fprintf(w, "%s\n", styles(streams).dim.Render(fmt.Sprintf("… and %d more error classes: -o json lists them all", hidden)))
		}
	}
	if len(r.Redead) > 0 {
		fmt.Fprintln(w)
		if err := redeadTable(streams, r).render(); err != nil {
			return err
		}
	}
	if r.LiveQueues.Unavailable == "" && len(r.LiveQueues.Queues) > 0 {
		fmt.Fprintln(w)
		return queueTable(streams, r.LiveQueues).render()
	}
	if !streams.StdoutTTY {
		fmt.Fprintln(w)
		t := newTable(streams, "LIVE QUEUES", "UNAVAILABLE").truncatable("UNAVAILABLE")
		t.addRow(r.LiveQueues.WorkQueue, r.LiveQueues.Unavailable)
		return t.render()
	}
	return nil
}

// writeHeadlines writes the three lines on-call reads first: are letters
// arriving faster, how late are the holds, what do the live queues hold.
func writeHeadlines(streams *IOStreams, r summaryReport) error {
	st := styles(streams)
	var b strings.Builder
	if r.Since != nil || r.Until != nil {
		from, to := "the first letter", "now"
		if r.Since != nil {
			from = r.Since.Format(time.RFC3339)
		}
		if r.Until != nil {
			to = r.Until.Format(time.RFC3339)
		}
		fmt.Fprintf(&b, "%s\n", st.dim.Render(fmt.Sprintf("counting letters dead-lettered from %s to %s; arrival windows end %s",
			from, to, r.ArrivalsEnd.Format(time.RFC3339))))
	}

	a := r.Arrivals
	arrivals := "none in the last 24 h"
	if a.Last24h.Letters > 0 {
		arrivals = fmt.Sprintf("%s: %s in the last 5 min against %s over the hour; the hour %s against %s over 24 h",
			strings.ToUpper(trendText(a.FiveMinutesVsHour)), rateText(a.Last5m), rateText(a.Last1h),
			trendText(a.HourVsDay), rateText(a.Last24h))
		if a.FiveMinutesVsHour.Direction == deadletter.Rising || a.HourVsDay.Direction == deadletter.Rising {
			arrivals = st.warn.Render(arrivals)
		}
	}
	headline(&b, streams, st.header.Render("Arrivals "), arrivals)

	o := r.Overdue
	overdue := "no hold is past its due time"
	if o.Count > 0 {
		overdue = st.warn.Render(fmt.Sprintf("%d holds past due: p50 %s late, p99 %s, max %s",
			o.Count, durationText(o.LatenessP50), durationText(o.LatenessP99), durationText(o.LatenessMax)))
	}
	headline(&b, streams, st.header.Render("Overdue  "), overdue)
	if o.Permanent > 0 {
		headline(&b, streams, st.header.Render("For good "), fmt.Sprintf(
			"%s past due failed for good (%s): no retry fixes them, so they page nobody; review, then `expiryctl dlq discard`",
			phrase.Count(int(o.Permanent), "letter", "letters"), permanentText(o)))
	}
	headline(&b, streams, st.header.Render("At source"), holdsText(st, r.Holds))

	q := r.LiveQueues
	// What the broker or the flag said is shown escaped: it is not ours.
	live := st.dim.Render(fmt.Sprintf("unavailable (%s): the archive's signals are complete, the broker's are missing",
		termsafe.EscapeLine(q.Unavailable)))
	if q.Unavailable == "" {
		live = fmt.Sprintf("%s: %d ready, %d in flight (%s) · %d scheduled in retry queues · %d isolated in the DLQ, not yet captured",
			termsafe.EscapeLine(q.WorkQueue), deref(q.Ready), deref(q.InFlight), consumersText(q.Consumers), deref(q.Scheduled), deref(q.Isolated))
		if q.Note != "" {
			live += " (" + termsafe.EscapeLine(q.Note) + ")"
		}
		if q.Consumers != nil && *q.Consumers == 0 && deref(q.Ready) > 0 {
			live = st.warn.Render(live)
		}
	}
	headline(&b, streams, st.header.Render("Queues   "), live)
	for _, line := range q.Queues {
		if line.Advice != "" {
			headline(&b, streams, st.header.Render("Storage  "), line.Advice)
		}
	}
	_, err := io.WriteString(streams.Out, b.String())
	return err
}

// queueVersionAdvice is what a DLQ of classic queue version 1 should
// change: the policy that makes it version 2, for that queue alone. A name
// that would not print as itself gets no command to copy.
func queueVersionAdvice(queue string) string {
	shown := termsafe.EscapeLine(queue)
	fix := "a policy of queue-version 2 for it (docs/operations.md)"
	if shown == queue {
		fix = fmt.Sprintf("`rabbitmqctl set_policy dlq-v2 '^%s$' '{\"queue-version\":2}' --apply-to queues` (docs/operations.md)",
			strings.ReplaceAll(regexp.QuoteMeta(queue), "'", `'\''`))
	}
	return fmt.Sprintf("the DLQ %s is a classic queue of version 1, which RabbitMQ pages to disk while a capture runs behind "+
		"its producers, costing the broker up to twice the CPU a letter; version 2 holds steady: %s", shown, fix)
}

// permanentText lists the permanent categories' overdue letters.
func permanentText(o deadletter.Overdue) string {
	var parts []string
	for _, c := range o.ByCategory {
		if c.Permanent {
			parts = append(parts, fmt.Sprintf("%s %d", c.Category, c.Count))
		}
	}
	return strings.Join(parts, ", ")
}

// holdsText is the headline of the holds past their deadline in the
// reservation database.
func holdsText(st styleSet, h holdsAtSource) string {
	switch {
	case !h.Configured:
		return st.dim.Render("not read: the policy sets no gap_query; an admin enables it with " +
			"`expiryctl policy set --template reservations`, then run with --outcome-url")
	case h.Unavailable != "":
		return st.warn.Render(fmt.Sprintf("unavailable (%s): the archive's signals are complete, the reservation database's are missing",
			termsafe.EscapeLine(h.Unavailable)))
	case *h.PastDeadline == 0:
		return "no hold is past its deadline in the reservation database"
	}
	their := "their"
	if *h.PastDeadline == 1 {
		their = "its"
	}
	text := fmt.Sprintf("%s past %s deadline in the reservation database, the oldest %s late",
		phrase.Count(int(*h.PastDeadline), "hold", "holds"), their, durationText(h.OldestLateSeconds))
	if *h.Unaccounted > 0 {
		text += fmt.Sprintf(": %d of them no overdue letter speaks for (lost before a dead-letter queue, or not captured yet)",
			*h.Unaccounted)
	}
	return st.warn.Render(text)
}

// headline writes one labelled line of the summary's head. On a terminal
// narrower than the line it wraps at spaces, under the text rather than
// under the label, so that a word is never cut in two — nor a flag at its
// hyphen, which ansi.Wordwrap would (--/outcome-url).
func headline(b *strings.Builder, streams *IOStreams, label, text string) {
	const indent = "           " // the label's nine columns and two spaces
	if width, _, ok := streams.terminal(); ok && width > len(indent)+20 {
		text = strings.ReplaceAll(linewrap.Words(text, width-len(indent)), "\n", "\n"+indent)
	}
	fmt.Fprintf(b, "%s  %s\n", label, text)
}

func arrivalsTable(streams *IOStreams, a deadletter.Arrivals) *table {
	t := newTable(streams, "WINDOW", "LETTERS", "PER MINUTE", "TREND", "AGAINST", "RATIO")
	t.addRow("5m", strconv.FormatInt(a.Last5m.Letters, 10), perMinute(a.Last5m.PerMinute),
		string(a.FiveMinutesVsHour.Direction), "1h", ratioText(a.FiveMinutesVsHour.Ratio))
	t.addRow("1h", strconv.FormatInt(a.Last1h.Letters, 10), perMinute(a.Last1h.PerMinute),
		string(a.HourVsDay.Direction), "24h", ratioText(a.HourVsDay.Ratio))
	t.addRow("24h", strconv.FormatInt(a.Last24h.Letters, 10), perMinute(a.Last24h.PerMinute), "-", "-", "-")
	return t
}

func overdueTable(streams *IOStreams, o deadletter.Overdue) *table {
	t := newTable(streams, "OVERDUE", "LATE P50 S", "LATE P99 S", "LATE MAX S", "OLDEST DUE", "FOR GOOD")
	oldest := "-"
	if o.OldestDueAt != nil {
		oldest = o.OldestDueAt.UTC().Format(time.RFC3339)
	}
	t.addRow(strconv.FormatInt(o.Count, 10), secondsText(o.LatenessP50), secondsText(o.LatenessP99), secondsText(o.LatenessMax), oldest,
		strconv.FormatInt(o.Permanent, 10))
	return t
}

// holdsTable is the holds past their deadline at their source, for a
// pipe: counts empty ("-") when not read, and why.
func holdsTable(streams *IOStreams, h holdsAtSource) *table {
	t := newTable(streams, "HOLDS PAST DEADLINE", "OLDEST DEADLINE", "OLDEST LATE S", "UNACCOUNTED", "UNAVAILABLE").truncatable("UNAVAILABLE")
	past, oldest, unaccounted, why := "-", "-", "-", h.Unavailable
	if h.PastDeadline != nil {
		past, unaccounted = strconv.FormatInt(*h.PastDeadline, 10), strconv.FormatInt(*h.Unaccounted, 10)
	}
	if h.OldestDeadline != nil {
		oldest = h.OldestDeadline.UTC().Format(time.RFC3339)
	}
	if !h.Configured {
		why = "the policy sets no gap_query"
	}
	t.addRow(past, oldest, secondsText(h.OldestLateSeconds), unaccounted, why)
	return t
}

func categoryTable(streams *IOStreams, r summaryReport) *table {
	// What on-call reads first comes first, so that a terminal too narrow
	// for the row cuts the totals and the queues, not how many wait, since
	// when, and whether it is getting worse.
	t := newTable(streams, "CATEGORY", "WAITING", "OVERDUE", "OLDEST", "5M/MIN", "TREND", "1H/MIN", "24H/MIN", "TOTAL", "ATTEMPTS MIN/P50/MAX", "QUEUES").
		truncatable("QUEUES", "ATTEMPTS MIN/P50/MAX", "24H/MIN", "TOTAL")
	overdue := map[deadletter.Category]int64{}
	for _, c := range r.Overdue.ByCategory {
		overdue[c.Category] = c.Count
	}
	for _, c := range r.Categories {
		oldest := "-"
		if c.OldestDeadLetteredAt != nil {
			oldest = formatTime(streams, *c.OldestDeadLetteredAt, r.At)
		}
		t.addRow(string(c.Category), strconv.FormatInt(c.Count, 10), strconv.FormatInt(overdue[c.Category], 10), oldest,
			perMinute(c.Arrivals.Last5m.PerMinute), trendText(c.Arrivals.FiveMinutesVsHour),
			perMinute(c.Arrivals.Last1h.PerMinute), perMinute(c.Arrivals.Last24h.PerMinute),
			strconv.FormatInt(c.Total, 10), attemptsText(c.Attempts), queueLabels(c.Queues))
	}
	return t
}

// queueLabels are the queues of a category's line, each named with its
// system where that is not RabbitMQ (letterview.QueueLabel).
func queueLabels(queues []string) string {
	labels := make([]string, len(queues))
	for i, q := range queues {
		labels[i] = letterview.QueueLabel(q, registry.Systems())
	}
	return strings.Join(labels, ",")
}

func classTable(streams *IOStreams, classes []deadletter.ErrorClassSignals) *table {
	t := newTable(streams, "ERROR CLASS", "CATEGORIES", "WAITING", "TOTAL", "ATTEMPTS MIN/P50/MAX").truncatable("ERROR CLASS", "CATEGORIES")
	for i, c := range classes {
		if streams.StdoutTTY && i == maxClassesShown {
			break
		}
		class := c.ErrorClass
		if class == "" && streams.StdoutTTY {
			class = "(none)"
		}
		names := make([]string, len(c.Categories))
		for j, cat := range c.Categories {
			names[j] = string(cat)
		}
		t.addRow(class, strings.Join(names, ","), strconv.FormatInt(c.Count, 10), strconv.FormatInt(c.Total, 10), attemptsText(c.Attempts))
	}
	return t
}

func queueTable(streams *IOStreams, q liveQueues) *table {
	t := newTable(streams, "QUEUE", "STATE", "READY", "IN FLIGHT", "CONSUMERS", "HEAD AGE").truncatable("QUEUE").keepEnds("QUEUE")
	states := map[deadletter.QueueRole]string{deadletter.RoleWork: "ready / in flight", deadletter.RoleRetry: "scheduled", deadletter.RoleDeadLetter: "isolated"}
	for _, l := range q.Queues {
		state := states[l.Role]
		if state == "" {
			state = string(l.Role)
		}
		age := "-"
		if l.HeadAgeSeconds != nil {
			age = durationText(l.HeadAgeSeconds)
			if !streams.StdoutTTY {
				age = secondsText(l.HeadAgeSeconds)
			}
			if l.HeadAgeSource != "head_message_timestamp" {
				age = "~" + age + " (est.)"
			}
		}
		consumers := "unseen"
		if l.Consumers != nil {
			consumers = strconv.Itoa(*l.Consumers)
		}
		t.addRow(l.Name, state, strconv.FormatInt(l.Ready, 10), strconv.FormatInt(l.Unacked, 10), consumers, age)
	}
	return t
}

// rateText is a window's rate for a sentence: "12.4/min".
func rateText(w deadletter.ArrivalWindow) string { return perMinute(w.PerMinute) + "/min" }

// perMinute shows a rate with the digits that matter at its size.
func perMinute(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r < 0.1:
		return strconv.FormatFloat(r, 'f', 3, 64)
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

// trendText is "rising ×4.2", or the direction alone when there is no ratio.
func trendText(t deadletter.Trend) string {
	if t.Ratio == nil {
		return string(t.Direction)
	}
	return string(t.Direction) + " ×" + strconv.FormatFloat(*t.Ratio, 'f', 1, 64)
}

func ratioText(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 3, 64)
}

func attemptsText(a *deadletter.AttemptSpread) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d", a.Min, a.P50, a.Max)
}

// secondsText is a duration for a pipe: whole seconds.
func secondsText(s *deadletter.Seconds) string {
	if s == nil {
		return "-"
	}
	return strconv.FormatInt(int64(math.Round(s.Duration().Seconds())), 10)
}

// durationText is a duration for people, to the two units that matter.
func durationText(s *deadletter.Seconds) string {
	if s == nil {
		return "-"
	}
	return phrase.Approximate(s.Duration())
}

func deref[T int | int64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
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

// consumersText counts a work queue's consumers, or says the system shows
// none (nil).
func consumersText(n *int) string {
	if n == nil {
		return "consumers unseen"
	}
	return phrase.Count(*n, "consumer", "consumers")
}
