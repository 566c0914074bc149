package commands

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/requestview"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// NewCmdReplay builds `expiryctl replay`, the governed replay commands.
func NewCmdReplay(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay <command>",
		Short: "Request, approve and run governed replays",
		Long: `Put dead letters back on their queue only through a governed request.

A request freezes a cohort (one letter or a bounded set); a different person,
listed as an approver in the policy, approves exactly that cohort; the run
publishes exactly those letters, at least once and at most ` + strconv.Itoa(replay.PublishBound) + ` times per
approval, at a bounded rate, with publisher confirms, a canary and stop
conditions, keeping each job's identity (body, message id, idempotency key).
Everything is audited.`,
		Example: `  expiryctl replay request --reason transient-exhausted --since 2h --max 200 --rate 20 --why "INC-4211 db failover"
  expiryctl replay show 7
  expiryctl replay approve 7 --why "checked with payments"   # as someone else
  expiryctl replay run 7`,
	}
	cmd.AddCommand(NewCmdReplayRequest(f, nil), NewCmdReplayShow(f, nil), NewCmdReplayList(f, nil),
		NewCmdReplayReview(f, replay.StatusApproved, nil), NewCmdReplayReview(f, replay.StatusRejected, nil),
		NewCmdReplayCancel(f, nil), NewCmdReplayRun(f, nil), NewCmdReplayPlan(f, nil))
	return cmd
}

// selectionFlags are the flags that choose letters, shared by `replay
// request` and `dlq discard`.
type selectionFlags struct {
	IDs     []int64
	Reasons []string
	Queue   string
	Since   string
	Until   string
	Search  string
	Max     int
}

func (s *selectionFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64SliceVar(&s.IDs, "id", nil, "dead-letter id (repeatable); instead of a filter")
	fl.StringSliceVarP(&s.Reasons, "reason", "r", nil, "filter: reason categories (repeatable)")
	fl.StringVar(&s.Queue, "queue", "", "filter: dead-letter queue the letters were captured from")
	fl.StringVar(&s.Since, "since", "", "filter: dead-lettered at or after (RFC 3339, date, or duration ago)")
	fl.StringVar(&s.Until, "until", "", "filter: dead-lettered before")
	fl.StringVarP(&s.Search, "search", "s", "", "filter: ids, error class or error text contain this")
	fl.IntVar(&s.Max, "max", 0, "with a filter: the most letters to take, oldest first (required; at most the policy's max_cohort)")
	_ = cmd.RegisterFlagCompletionFunc("reason", cobra.FixedCompletions(categoryNames(), cobra.ShellCompDirectiveNoFileComp))
}

func (s *selectionFlags) resolve(now time.Time) (replay.Selection, error) {
	usesFilter := len(s.Reasons) > 0 || s.Queue != "" || s.Since != "" || s.Until != "" || s.Search != ""
	if s.Max < 0 {
		return replay.Selection{}, flagErrorf("invalid --max %d: it counts letters, so use 1 or more (at most the policy's max_cohort)", s.Max)
	}
	if len(s.IDs) > 0 && (usesFilter || s.Max > 0) {
		return replay.Selection{}, flagErrorf("use either --id or a filter (--reason, --queue, --since, --until, --search with --max), not both")
	}
	if len(s.IDs) > 0 {
		return replay.Selection{IDs: s.IDs}, nil
	}
	if !usesFilter && s.Max == 0 {
		return replay.Selection{}, flagErrorf("choose letters: --id ID (repeatable), or a filter such as --reason transient-exhausted with --max N")
	}
	if s.Max <= 0 {
		return replay.Selection{}, flagErrorf("a filter needs --max N: a request is bounded (at most the policy's max_cohort)")
	}
	list := &DLQListOptions{Reasons: s.Reasons, Since: s.Since, Until: s.Until, Now: func() time.Time { return now }}
	list.Filter.Queue, list.Filter.Search = s.Queue, s.Search
	if err := list.resolve(); err != nil {
		return replay.Selection{}, err
	}
	return replay.Selection{Filter: list.Filter, Max: s.Max}, nil
}

// ReplayRequestOptions holds what `expiryctl replay request` needs.
type ReplayRequestOptions struct {
	IO       *IOStreams
	Requests func(context.Context) (service.Requests, error)
	Now      func() time.Time

	Selection       selectionFlags
	Rate            float64
	Canary          int
	Why             string
	ToExchange      string
	RoutingKey      string
	FreshKey        bool
	ConfirmEligible bool
	// SameHandlerOK is --same-handler-ok's reason; IncludePermanent is
	// --include-permanent.
	SameHandlerOK    string
	IncludePermanent bool
	ViaExchange      bool
	NotBefore        string
	IncludeNotDue    bool
	// Unwatched is --unwatched's reason.
	Unwatched string
	Output    *outputFormat

	request replay.NewRequest
}

// NewCmdReplayRequest builds `expiryctl replay request`.
func NewCmdReplayRequest(f *Factory, runF func(context.Context, *ReplayRequestOptions) error) *cobra.Command {
	opts := &ReplayRequestOptions{IO: f.IO, Requests: f.Requests, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "request (--id ID... | FILTER --max N) --why TEXT",
		Short: "Ask for a replay of one letter or a bounded cohort",
		Long: `Create a replay request. The cohort is frozen now: the exact letters and a
hash of each payload. A different approver must approve it before it can run.

Letters in another open request are refused when named by --id; a filter only
matches letters waiting for a decision, oldest first, up to --max.

` + whereHelp() + `

Time: --not-before schedules the replay (an RFC 3339 time or a duration from
now); the run, started any time after the approval, publishes nothing before
it, with no broker plugin. A letter whose hold is not yet due (its due_at),
or whose last error carried a Retry-After (x-retry-after, or Retry-After as
seconds or an HTTP date), is not published before then either; the run waits
for it, in cohort order. --include-not-due publishes them without waiting.
The database refuses a time in the past, one after retention redacts the
cohort, and a Retry-After it cannot read (rules not-before, retry-after).

Outcomes: the run captures the dead-letter queues its cohort came from while
it publishes and for its canary window after, so that its stop conditions see
the jobs that die again without a separate ` + "`dlq ingest --follow`" + `. A run that
cannot (the queue is gone, or these letters came from elsewhere) does not
start (rule dlq-unwatched) unless the request says --unwatched "why"; the
approver sees it.

` + handlerHelp(),
		Example: `  expiryctl replay request --id 42 --why "INC-4211: r-8421 stuck after failover"
  expiryctl replay request --reason transient-exhausted --since 2h --max 200 --rate 20 --why INC-4211
  expiryctl replay request --id 77 --routing-key reservation-expiry --why INC-4211
  expiryctl replay request --id 78 --via-exchange --why "INC-4213: billing must see it too"
  expiryctl replay request --reason transient-exhausted --max 200 --not-before 2026-12-05T06:00:00Z --why "INC-4214: after the maintenance window"
  expiryctl replay request --search throttled --max 50 --not-before 30m --why "INC-4215: inventory asked for 30 minutes"
  expiryctl replay request --reason transient-exhausted --max 50 --why INC-4211 \
      --same-handler-ok "the database failed over; the worker was never at fault"
  expiryctl replay request --reason conflict --max 20 --include-permanent --why "INC-4212: v2 reads the current version"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := opts.Selection.resolve(opts.Now())
			if err != nil {
				return err
			}
			if strings.TrimSpace(opts.Why) == "" {
				return flagErrorf("--why is required: name the incident or ticket, e.g. --why INC-4211")
			}
			// An unset rate is the policy's max_rate; a 0 given on purpose
			// is a mistake, not a request for the fastest rate there is.
			if cmd.Flags().Changed("rate") && !(opts.Rate > 0) {
				return flagErrorf("invalid --rate %g: use a number of replays per second above 0, or leave --rate out for the policy's max_rate", opts.Rate)
			}
			if (opts.ToExchange == "") != (opts.RoutingKey == "") && opts.RoutingKey == "" {
				return flagErrorf("--to-exchange needs --routing-key (use --to-exchange \"\" --routing-key QUEUE for a queue)")
			}
			if opts.FreshKey && !opts.ConfirmEligible {
				return flagErrorf("--fresh-key needs --confirm-eligible: confirm the reservations are still eligible to expire")
			}
			var notBefore *time.Time
			if cmd.Flags().Changed("not-before") {
				at, err := parseLaterFlag("not-before", opts.NotBefore, opts.Now())
				if err != nil {
					return err
				}
				notBefore = &at
			}
			if cmd.Flags().Changed("unwatched") && strings.TrimSpace(opts.Unwatched) == "" {
				return flagErrorf(`--unwatched needs a reason, e.g. --unwatched "the DLQ is captured at the other site"`)
			}
			if cmd.Flags().Changed("same-handler-ok") && strings.TrimSpace(opts.SameHandlerOK) == "" {
				return flagErrorf(`--same-handler-ok needs a reason, e.g. --same-handler-ok "the database failed over; the worker was never at fault"`)
			}
			opts.request = replay.NewRequest{Kind: replay.KindReplay, Selection: sel, Rate: opts.Rate, Why: opts.Why,
				ToExchange: opts.ToExchange, ToRoutingKey: opts.RoutingKey, FreshKey: opts.FreshKey, ConfirmEligible: opts.ConfirmEligible,
				SameHandlerWhy: opts.SameHandlerOK, IncludePermanent: opts.IncludePermanent, ViaExchange: opts.ViaExchange,
				NotBefore: notBefore, IncludeNotDue: opts.IncludeNotDue, UnwatchedWhy: opts.Unwatched}
			if cmd.Flags().Changed("canary") {
				if opts.Canary < 0 {
					return flagErrorf("invalid --canary %d: use 0 or more", opts.Canary)
				}
				opts.request.Canary = &opts.Canary
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayRequestRun(cmd.Context(), opts)
		},
	}
	opts.Selection.register(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&opts.Rate, "rate", 0, "replays per second, a ceiling (default: the policy's max_rate)")
	fl.IntVar(&opts.Canary, "canary", 0, "letters sent first, then the run waits for their outcome (default 10% of the cohort, at least 1)")
	fl.StringVar(&opts.Why, "why", "", "the incident or ticket (required)")
	fl.StringVar(&opts.ToExchange, "to-exchange", "", "target exchange for letters that name no queue they failed in")
	fl.StringVar(&opts.RoutingKey, "routing-key", "", "target routing key (with the default exchange: the queue) for letters that name no queue they failed in")
	fl.BoolVar(&opts.ViaExchange, "via-exchange", false, "publish through each letter's original exchange: every queue bound there gets a copy")
	fl.StringVar(&opts.NotBefore, "not-before", "", "publish nothing before this `time`: RFC 3339, or a duration from now (30m, 2h, 1d)")
	fl.BoolVar(&opts.IncludeNotDue, "include-not-due", false, "publish letters not yet due (their hold's deadline, their Retry-After) without waiting")
	fl.StringVar(&opts.Unwatched, "unwatched", "", "let the run start without capturing its dead-letter queues, saying `why`; shown to the approver")
	fl.BoolVar(&opts.FreshKey, "fresh-key", false, "give each replayed job a new idempotency key (the approver must allow it)")
	fl.BoolVar(&opts.ConfirmEligible, "confirm-eligible", false, "with --fresh-key: you confirm the reservations are still eligible to expire")
	fl.StringVar(&opts.SameHandlerOK, "same-handler-ok", "", "say `why` the handler that failed the letters may take them again (or nothing consume them yet); shown to the approver")
	fl.BoolVar(&opts.IncludePermanent, "include-permanent", false, "include letters that failed for good (conflict, validation, malformed, not-found); shown to the approver")
	opts.Output = addOutputFlag(cmd, "table", "json")
	return cmd
}

func replayRequestRun(ctx context.Context, opts *ReplayRequestOptions) error {
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
	fmt.Fprintf(opts.IO.Out, "replay request %d is %s: %s", r.ID, r.Status, phrase.Count(r.Items, "letter", "letters"))
	if created.Matched > r.Items {
		fmt.Fprintf(opts.IO.Out, " (the oldest %d of %d matching)", r.Items, created.Matched)
	}
	fmt.Fprintf(opts.IO.Out, ", rate %g/s, canary %d, expires %s\n", r.Rate, r.Canary, r.ExpiresAt.UTC().Format(time.RFC3339))
	printRequestFlags(opts.IO, r)
	fmt.Fprintf(opts.IO.ErrOut, "next: ask an approver to review it with `expiryctl replay show %d` and `expiryctl replay approve %d`\n", r.ID, r.ID)
	return nil
}

// ReplayShowOptions holds what `expiryctl replay show` needs.
type ReplayShowOptions struct {
	IO       *IOStreams
	Requests func(context.Context) (service.Requests, error)
	ID       int64
	Sample   int
	Output   *outputFormat

	// Watch is --watch; UnauditedRequests serves its redraws.
	Watch             *watchFlag
	UnauditedRequests func(context.Context) (service.RequestReads, error)
	// Planner, when set, adds a replay's rate plan (see `replay plan`)
	// to the view; a watch leaves it out.
	Planner func(context.Context) (service.Planner, error)
	// Pager takes the view when it is taller than the terminal (not a
	// watch's).
	Pager *pager
}

// NewCmdReplayShow builds `expiryctl replay show`.
func NewCmdReplayShow(f *Factory, runF func(context.Context, *ReplayShowOptions) error) *cobra.Command {
	opts := &ReplayShowOptions{IO: f.IO, Requests: f.Requests, Planner: f.Planner}
	cmd := &cobra.Command{
		Use:   "show REQ",
		Short: "Show everything an approver approves",
		Long: `Show a request as the approver sees it: requester and reason, the cohort
(count, categories, sample rows with payload hashes and targets), rate, canary,
stop conditions, flags such as a fresh idempotency key, and any letter that
changed since the cohort was frozen. A replay's view ends with its rate plan,
as ` + "`replay plan`" + ` measures it (under "plan" in -o json).

With --watch it follows the request, its run's progress included, until
Ctrl-C; the watch is audited once. Piped, each update is one line: the time,
then status=, items=, the items per run state, changes= (letters changed
since the cohort was frozen), runner_held= while it is running (false: no
runner holds it, and ` + "`replay run`" + ` resumes it) and halt_reason= once it
halted or was cancelled.

A running request that no runner holds (its runner was interrupted with
Ctrl-C, killed, or lost its connection) says so, with the command that
resumes it; -o json has "runner_held": false (true while a runner holds it,
absent for any other status) and "runner", the session that holds it.

On a terminal, a view taller than the screen goes through $EXPIRYCTL_PAGER,
else $PAGER, else less (with LESS=FRX unless LESS is set); an empty value or
cat, or --no-pager, writes it directly. A watch redraws in place instead.`,
		Example: `  expiryctl replay show 7
  expiryctl replay show 7 --sample 0 -o json
  expiryctl replay show 7 -o json | jq .runner_held   # false: running, but no runner holds it
  expiryctl replay show 7 --sample 0 --no-pager > cohort.txt
  expiryctl replay show 7 --watch=2s --sample 5      # follow a run in place
  expiryctl replay show 7 --watch | grep -m1 -E 'status=(completed|halted)'
  # 2026-11-30T03:00:05Z request=7 kind=replay status=running items=200 pending=80 confirmed=120 changes=0`,
		Args: requestIDArg("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, _ = strconv.ParseInt(args[0], 10, 64)
			if opts.Sample < 0 {
				return flagErrorf("invalid --sample %d: use 0 for all items or a positive number", opts.Sample)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayShowRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Sample, "sample", 20, "items listed; 0 lists the whole cohort")
	opts.Output = addOutputFlag(cmd, "table", "json")
	opts.Watch, opts.UnauditedRequests = addWatchFlag(cmd, f), f.UnauditedRequests
	opts.Pager = addPagerFlag(cmd, f)
	return cmd
}

func requestIDArg(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return flagErrorf("replay %s takes one request id, e.g. `expiryctl replay %s 7`", verb, verb)
		}
		if id, err := strconv.ParseInt(args[0], 10, 64); err != nil || id <= 0 {
			return flagErrorf("invalid request id %q: use the number `expiryctl replay list` shows", args[0])
		}
		return nil
	}
}

func replayShowRun(ctx context.Context, opts *ReplayShowOptions) error {
	if opts.Watch.on() {
		return replayShowWatch(ctx, opts)
	}
	svc, err := opts.Requests(ctx)
	if err != nil {
		return err
	}
	d, err := svc.Show(ctx, opts.ID, opts.Sample)
	if err != nil {
		return err
	}
	return showRequestWithPlan(ctx, opts, d)
}

func showRequest(streams *IOStreams, output *outputFormat, d replay.Detail) error {
	if output.value == "json" {
		return writeJSON(streams.Out, d)
	}
	return renderRequest(streams, d)
}

// replayShowWatch is `replay show --watch`: the request as `replay show`
// prints it, read through the audited service the first time and the
// unaudited reads after; piped, requestLine.
func replayShowWatch(ctx context.Context, opts *ReplayShowOptions) error {
	reads := &watchServices[service.RequestReads]{audited: requestReads(opts.Requests), unaudited: opts.UnauditedRequests}
	title := "replay show " + strconv.FormatInt(opts.ID, 10)
	return opts.Watch.run(ctx, opts.IO, title, opts.Output.value == "json", func(ctx context.Context, u *watchUpdate) error {
		svc, err := reads.get(ctx, u.Redraw)
		if err != nil {
			return err
		}
		d, err := svc.Show(ctx, opts.ID, opts.Sample)
		if err != nil {
			return err
		}
		if u.OneLine {
			u.Line = requestLine(d)
			return nil
		}
		return showRequest(u.IO, opts.Output, d)
	})
}

// requestReads is the Requests constructor as one of RequestReads, for
// the audited first read of a watch.
func requestReads(requests func(context.Context) (service.Requests, error)) func(context.Context) (service.RequestReads, error) {
	return func(ctx context.Context) (service.RequestReads, error) { return requests(ctx) }
}

// requestLine is a request on one line: what a watch of it follows.
func requestLine(d replay.Detail) string {
	line := (&logfmt{}).add("request", d.ID).add("kind", d.Kind).add("status", d.Status).add("items", d.Items)
	for _, state := range itemStates(d.States) {
		line.add(state, d.States[state])
	}
	line.add("changes", len(d.Changes))
	if d.RunnerHeld != nil {
		line.add("runner_held", *d.RunnerHeld)
	}
	if d.HaltReason != "" {
		line.add("halt_reason", d.HaltReason)
	}
	return line.String()
}

// itemStates are the states of states in run order, those the runner
// knows first.
func itemStates(states map[string]int) []string {
	order := []string{"pending", "publishing", "confirmed", "failed", "skipped"}
	out := []string{}
	for _, s := range order {
		if _, ok := states[s]; ok {
			out = append(out, s)
		}
	}
	var others []string
	for s := range states {
		if !slices.Contains(order, s) {
			others = append(others, s)
		}
	}
	slices.Sort(others)
	return append(out, others...)
}

func renderRequest(streams *IOStreams, d replay.Detail) error {
	st := styles(streams)
	view := requestview.Render(d, requestview.Styles{Title: st.header.Render, Warn: st.warn.Render},
		"approve only with --allow-fresh-key")
	// requestview's labels take two spaces and 20 columns, then a space.
	if _, err := fmt.Fprintln(streams.Out, wrapFields(streams, view, 23)); err != nil {
		return err
	}
	if len(d.Sample) == 0 {
		return nil
	}
	fmt.Fprintf(streams.Out, "\n%s\n", st.title.Render(fmt.Sprintf("Cohort (%d of %d)", len(d.Sample), d.Items)))
	t := newTable(streams, "#", "LETTER", "CATEGORY", "ERROR-CLASS", "RESERVATION", "TARGET", "PAYLOAD-SHA256", "STATE").
		truncatable("TARGET", "ERROR-CLASS", "PAYLOAD-SHA256", "RESERVATION")
	for _, it := range d.Sample {
		t.addRow(strconv.Itoa(it.Ordinal+1), strconv.FormatInt(it.DeadLetterID, 10), string(it.Category), it.ErrorClass,
			it.ReservationID, it.Target, it.PayloadSHA256[:16]+"…", it.State)
	}
	return t.render()
}

// ReplayListOptions holds what `expiryctl replay list` needs.
type ReplayListOptions struct {
	IO       *IOStreams
	Requests func(context.Context) (service.Requests, error)
	Now      func() time.Time
	Status   string
	Limit    int
	Output   *outputFormat
	status   replay.Status

	// Watch is --watch; UnauditedRequests serves its redraws.
	Watch             *watchFlag
	UnauditedRequests func(context.Context) (service.RequestReads, error)
}

// NewCmdReplayList builds `expiryctl replay list`.
func NewCmdReplayList(f *Factory, runF func(context.Context, *ReplayListOptions) error) *cobra.Command {
	opts := &ReplayListOptions{IO: f.IO, Requests: f.Requests, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List replay and discard requests, newest first",
		Long: `List replay and discard requests, newest first.

With --watch the list is updated until Ctrl-C; the watch is audited once.
Piped, each update is one line: the time, requests= (how many are listed),
the count per status, open= with each open request as ID:STATUS, and
no_runner= with the running requests that no runner holds.

A running request that no runner holds (its runner was interrupted, killed
or lost its connection) is named below the list, on stderr, with the command
that resumes it; -o json has "runner_held" on each running request.

-o csv writes one row per request (id, kind, status, items, rate, canary,
fresh_key, requested_by, requested_db_role, created_at, expires_at,
reviewed_by, reviewed_db_role, reviewed_at, started_at, finished_at,
cohort_hash, why, halt_reason), times in RFC 3339.`,
		Example: `  expiryctl replay list --status pending
  expiryctl replay list --watch                      # redraw every 5s until Ctrl-C
  expiryctl replay list --watch=30s >> requests.log  # piped, one line per update:
  # 2026-11-30T03:00:00Z requests=3 pending=1 running=1 completed=1 open=9:pending,8:running
  expiryctl replay list --watch -o json | jq -c '[.at, [.data[] | select(.status == "halted") | .id]]'
  expiryctl replay list --status running -o json | jq '.[] | select(.runner_held == false) | .id'   # runs to resume
  expiryctl replay list --limit 500 -o csv > requests.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Status != "" {
				s, err := replay.ParseStatus(opts.Status)
				if err != nil {
					return &FlagError{Err: err}
				}
				opts.status = s
			}
			if opts.Limit < 1 || opts.Limit > 10000 {
				return flagErrorf("invalid --limit %d: use 1 to 10000", opts.Limit)
			}
			if opts.Watch.on() && opts.Output.value == "csv" {
				return flagErrorf("--watch shows a table or, with -o json, one document per update: drop -o csv, or --watch")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Status, "status", "", "only requests with this status")
	cmd.Flags().IntVarP(&opts.Limit, "limit", "n", 50, "requests to list")
	statuses := []string{}
	for _, s := range replay.Statuses() {
		statuses = append(statuses, string(s))
	}
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	opts.Watch, opts.UnauditedRequests = addWatchFlag(cmd, f), f.UnauditedRequests
	return cmd
}

func replayListRun(ctx context.Context, opts *ReplayListOptions) error {
	if opts.Watch.on() {
		return replayListWatch(ctx, opts)
	}
	svc, err := opts.Requests(ctx)
	if err != nil {
		return err
	}
	reqs, err := svc.List(ctx, opts.status, opts.Limit)
	if err != nil {
		return err
	}
	return listRequests(opts.IO, opts.Output, opts.Now(), reqs)
}

func listRequests(streams *IOStreams, output *outputFormat, now time.Time, reqs []replay.Request) error {
	switch output.value {
	case "json":
		return writeJSON(streams.Out, reqs)
	case "csv":
		return writeCSV(streams.Out, requestCSVHeaders, reqs, requestCSVCells)
	}
	if len(reqs) == 0 {
		fmt.Fprintln(streams.ErrOut, "no requests")
		return nil
	}
	t := newTable(streams, "ID", "KIND", "STATUS", "ITEMS", "RATE", "REQUESTED-BY", "REVIEWED-BY", "CREATED", "OUTCOMES", "WHY").
		truncatable("WHY", "REVIEWED-BY", "REQUESTED-BY")
	for _, r := range reqs {
		// On a terminal a running request nobody runs reads as such in
		// its row, not only in the note below; piped, STATUS stays the
		// status that scripts match on.
		status := string(r.Status)
		if streams.StdoutTTY {
			status = requestview.StatusLabel(r)
		}
		t.addRow(strconv.FormatInt(r.ID, 10), string(r.Kind), status, strconv.Itoa(r.Items), fmt.Sprintf("%g/s", r.Rate),
			r.RequestedBy, r.ReviewedBy, formatTime(streams, r.CreatedAt, now), requestview.FatesCell(r.Fates), r.Why)
	}
	if err := t.render(); err != nil {
		return err
	}
	noteRunnersGone(streams, reqs)
	return nil
}

// replayListWatch is `replay list --watch`: the list as `replay list`
// prints it, read through the audited service the first time and the
// unaudited reads after; piped, requestsLine.
func replayListWatch(ctx context.Context, opts *ReplayListOptions) error {
	reads := &watchServices[service.RequestReads]{audited: requestReads(opts.Requests), unaudited: opts.UnauditedRequests}
	title := "replay list"
	if opts.status != "" {
		title += " --status " + string(opts.status)
	}
	return opts.Watch.run(ctx, opts.IO, title, opts.Output.value == "json", func(ctx context.Context, u *watchUpdate) error {
		svc, err := reads.get(ctx, u.Redraw)
		if err != nil {
			return err
		}
		reqs, err := svc.List(ctx, opts.status, opts.Limit)
		if err != nil {
			return err
		}
		if u.OneLine {
			u.Line = requestsLine(reqs)
			return nil
		}
		return listRequests(u.IO, opts.Output, opts.Now(), reqs)
	})
}

// requestsLine is a list of requests on one line: how many, how many per
// status, and each open request with its status, newest first.
func requestsLine(reqs []replay.Request) string {
	byStatus := map[replay.Status]int{}
	var open []string
	for _, r := range reqs {
		byStatus[r.Status]++
		if r.Open() {
			open = append(open, strconv.FormatInt(r.ID, 10)+":"+string(r.Status))
		}
	}
	line := (&logfmt{}).add("requests", len(reqs))
	for _, s := range replay.Statuses() {
		if n := byStatus[s]; n > 0 {
			line.add(string(s), n)
		}
	}
	if len(open) > 0 {
		line.add("open", strings.Join(open, ","))
	}
	if gone := runnersGone(reqs); len(gone) > 0 {
		line.add("no_runner", strings.Join(gone, ","))
	}
	return line.String()
}

// ReplayReviewOptions holds what `expiryctl replay approve|reject` needs.
type ReplayReviewOptions struct {
	IO            *IOStreams
	Requests      func(context.Context) (service.Requests, error)
	Decision      replay.Status
	ID            int64
	Why           string
	AllowFreshKey bool
	// CohortHash is the hash the approver was shown; empty means the one
	// this command shows before it approves.
	CohortHash string
	// Key is the approver's signing key file (`keys generate`); empty: an
	// unsigned approval.
	Key    string
	Now    func() time.Time
	Output *outputFormat
}

// NewCmdReplayReview builds `expiryctl replay approve` or `reject`.
func NewCmdReplayReview(f *Factory, decision replay.Status, runF func(context.Context, *ReplayReviewOptions) error) *cobra.Command {
	opts := &ReplayReviewOptions{IO: f.IO, Requests: f.Requests, Decision: decision, Now: f.Now}
	verb := "approve"
	short := "Approve a request (as an approver who is not the requester)"
	example := `  expiryctl replay show 7
  expiryctl replay approve 7 --why "cohort checked, payments agrees"
  expiryctl replay approve 7 --cohort-hash 3f9a… --why "as shown in the incident channel"`
	if decision == replay.StatusRejected {
		verb = "reject"
		short = "Reject a request, freeing its letters"
		example = `  expiryctl replay reject 7 --why "wait for the schema fix first"`
	}
	cmd := &cobra.Command{
		Use:   verb + " REQ",
		Short: short,
		Long: `Review a pending request (or a halted run, which needs a new approval).

An approval names the cohort hash the approver saw: --cohort-hash, as
` + "`replay show`" + ` printed it, or else the hash this command prints on stderr
before it approves. A request whose hash differs is refused.

Refused, with the rule named and exit code 4, when your login requested it
(four-eyes compares database logins, whatever --actor says), you are not in
expiryctl_approver or not an approver under the policy, the request expired
or was already reviewed, or its cohort changed since it was frozen. An
approval authorises one run of exactly the frozen cohort.` + signedApprovalHelp(decision),
		Example: example,
		Args:    requestIDArg(verb),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, _ = strconv.ParseInt(args[0], 10, 64)
			if opts.Key == "" && decision == replay.StatusApproved {
				opts.Key = f.Getenv("EXPIRYCTL_APPROVAL_KEY")
			}
			if decision == replay.StatusRejected && strings.TrimSpace(opts.Why) == "" {
				return flagErrorf("--why is required to reject: say what should happen instead")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayReviewRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Why, "why", "", "your reason, kept in the audit trail")
	if decision == replay.StatusApproved {
		cmd.Flags().BoolVar(&opts.AllowFreshKey, "allow-fresh-key", false, "approve a request that gives jobs a new idempotency key")
		cmd.Flags().StringVar(&opts.CohortHash, "cohort-hash", "", "the cohort hash you were shown by `replay show` (default: the one printed before approving)")
		cmd.Flags().StringVar(&opts.Key, "key", "", "sign the approval with your key file from `keys generate` (env EXPIRYCTL_APPROVAL_KEY)")
	}
	opts.Output = addOutputFlag(cmd, "text", "json")
	return cmd
}

// signedApprovalHelp is what `replay approve --help` says of --key.
func signedApprovalHelp(decision replay.Status) string {
	if decision != replay.StatusApproved {
		return ""
	}
	return `

With --key (or EXPIRYCTL_APPROVAL_KEY), the approval is signed with your own
key (` + "`keys generate`" + `): a statement of the request, its cohort, targets, rate,
canary and stop conditions, who asked, who approves and until when, kept with
the request and in the audit trail. A runner with a keyring runs only such
approvals; one without says the approval is unsigned.`
}

func replayReviewRun(ctx context.Context, opts *ReplayReviewOptions) error {
	svc, err := opts.Requests(ctx)
	if err != nil {
		return err
	}
	review := replay.ReviewOptions{Why: opts.Why, AllowFreshKey: opts.AllowFreshKey, CohortHash: opts.CohortHash, Now: opts.Now}
	if opts.Key != "" {
		key, err := os.ReadFile(opts.Key)
		if err != nil {
			return fmt.Errorf("cannot read --key: %w", err)
		}
		review.ApprovalKey = string(key)
	}
	var r replay.Request
	if opts.Decision == replay.StatusApproved {
		if review.CohortHash == "" {
			shown, err := svc.Show(ctx, opts.ID, 1)
			if err != nil {
				return err
			}
			review.CohortHash = shown.CohortHash
			fmt.Fprintf(opts.IO.ErrOut, "approving %s request %d as shown: %s, cohort hash %s, requested by %s (%s)\n",
				shown.Kind, shown.ID, phrase.Count(shown.Items, "letter", "letters"), shown.CohortHash, termsafe.EscapeLine(shown.RequestedBy), shown.RequestedDBRole)
			printReviewFlags(opts.IO, shown)
		}
		r, err = svc.Approve(ctx, opts.ID, review)
	} else {
		r, err = svc.Reject(ctx, opts.ID, review)
	}
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, r)
	}
	fmt.Fprintf(opts.IO.Out, "replay request %d is %s by %s\n", r.ID, r.Status, r.ReviewedBy)
	if r.Status == replay.StatusApproved && r.ApprovalNote == "" {
		fmt.Fprintln(opts.IO.ErrOut, "the approval is unsigned: a runner that requires signed approvals will not run it (sign with --key)")
	} else if r.Status == replay.StatusApproved {
		fmt.Fprintln(opts.IO.ErrOut, "the approval is signed with your key")
	}
	if r.Status == replay.StatusApproved {
		fmt.Fprintf(opts.IO.ErrOut, "next: `expiryctl replay run %d` (the approval is valid until %s and authorises one run)\n",
			r.ID, r.ApprovalExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// ReplayCancelOptions holds what `expiryctl replay cancel` needs.
type ReplayCancelOptions struct {
	IO       *IOStreams
	Requests func(context.Context) (service.Requests, error)
	ID       int64
	Why      string
}

// NewCmdReplayCancel builds `expiryctl replay cancel`.
func NewCmdReplayCancel(f *Factory, runF func(context.Context, *ReplayCancelOptions) error) *cobra.Command {
	opts := &ReplayCancelOptions{IO: f.IO, Requests: f.Requests}
	cmd := &cobra.Command{
		Use:   "cancel REQ",
		Short: "Cancel a pending, approved, running or halted request",
		Long: `Cancel a request. A running runner stops publishing at its next check;
letters not yet replayed are free again.`,
		Example: `  expiryctl replay cancel 7 --why "worker fix deployed, retrying from source"`,
		Args:    requestIDArg("cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, _ = strconv.ParseInt(args[0], 10, 64)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayCancelRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Why, "why", "", "your reason, kept in the audit trail")
	return cmd
}

func replayCancelRun(ctx context.Context, opts *ReplayCancelOptions) error {
	svc, err := opts.Requests(ctx)
	if err != nil {
		return err
	}
	r, err := svc.Cancel(ctx, opts.ID, opts.Why)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "replay request %d is %s\n", r.ID, r.Status)
	return nil
}
