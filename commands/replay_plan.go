package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// ReplayPlanOptions holds what `expiryctl replay plan` needs.
type ReplayPlanOptions struct {
	IO      *IOStreams
	Planner func(context.Context) (service.Planner, error)

	ID              int64
	WorkQueue       string
	ArrivalRate     float64
	FailureFraction float64
	Retries         int
	Output          *outputFormat
	// Plan is what the flags resolve to: the figures given replace the
	// measurements.
	Plan replay.PlanOptions
}

// NewCmdReplayPlan builds `expiryctl replay plan`.
func NewCmdReplayPlan(f *Factory, runF func(context.Context, *ReplayPlanOptions) error) *cobra.Command {
	opts := &ReplayPlanOptions{IO: f.IO, Planner: f.Planner}
	cmd := &cobra.Command{
		Use:   "plan REQ",
		Short: "Size a replay's rate against the consumers' headroom",
		Long: `Measure the traffic a replay joins and suggest a rate that the consumers of
its target queue can take, before it runs. Retries amplify load: a job whose
attempts fail transiently with fraction p, with n further attempts, is tried
(1 − p^(n+1))/(1 − p) times on average (the planning model) and 1+n times at
most. The plan shows, for the work queue the cohort's replay fills:

  arrival_rate      R, jobs/s: the management API's publish rate into the
                    work queue (what clients publish; RabbitMQ does not count
                    retries coming back from the retry queues). Without the
                    API: the archive's dead-letter arrivals over the last 5
                    minutes, a lower bound
  failure_fraction  p: publishes into the retry queues (<queue>.retry.<ms>)
                    over deliveries from the work queue
  attempts          n: the most attempts a letter of the cohort went
                    through, less the first
  upper_bound       the live load's attempts/s at most: R·(1+n)
  planning_bound    the live load's attempts/s expected: R·(1−p^(n+1))/(1−p)
  ack_rate          the consumers' acknowledgements/s: what they showed they
                    can take (a lower bound of their capacity)
  suggested_rate    the highest replay rate, at most the request's approved
                    ceiling, with (R + rate)·amplification ≤ ack_rate

` + planSystemsHelp() + `

Each figure says where it came from; -o json names them (arrival_rate,
failure_fraction, attempts, upper_bound, planning_bound, ack_rate,
suggested_rate, with *_source, limited_by, suggested_upper_bound,
suggested_planning_bound) and lists in "unavailable" what could not be
measured and why. --arrival-rate, --failure-fraction and --retries replace a
measurement with a figure you know. The management API's numbers lag the
queues by up to its statistics interval (5 s by default).

The plan binds the run's start: a run measures it again when it starts, and
when the suggestion is below the ceiling it starts there (never below its
floor, a twentieth of the ceiling) and paces from there, up toward the
ceiling while the consumers keep up, down while they fall behind. With no
consumer, or consumers that ack nothing while work waits, there is no
evidence of capacity: the plan says so and suggests nothing. A ceiling far
above the suggestion is still a reason to reject the request and ask again.`,
		Example: `  expiryctl replay plan 7
  expiryctl replay plan 7 -o json | jq '.suggested_rate, .unavailable'
  expiryctl replay plan 7 --work-queue reservation-expiry --failure-fraction 0.3 --retries 4`,
		Args: requestIDArg("plan"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, _ = strconv.ParseInt(args[0], 10, 64)
			fl := cmd.Flags()
			opts.Plan.WorkQueue = strings.TrimSpace(opts.WorkQueue)
			if fl.Changed("arrival-rate") {
				if opts.ArrivalRate < 0 {
					return flagErrorf("invalid --arrival-rate %g: use jobs per second, 0 or more", opts.ArrivalRate)
				}
				opts.Plan.ArrivalRate = &opts.ArrivalRate
			}
			if fl.Changed("failure-fraction") {
				if opts.FailureFraction < 0 || opts.FailureFraction > 1 {
					return flagErrorf("invalid --failure-fraction %g: use a fraction from 0 to 1, e.g. 0.2", opts.FailureFraction)
				}
				opts.Plan.FailureFraction = &opts.FailureFraction
			}
			if fl.Changed("retries") {
				if opts.Retries < 0 {
					return flagErrorf("invalid --retries %d: use the further attempts after the first, 0 or more", opts.Retries)
				}
				opts.Plan.Retries = &opts.Retries
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayPlanRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.WorkQueue, "work-queue", "", "the work queue whose consumers to measure (default: the queue the cohort's replay fills)")
	fl.Float64Var(&opts.ArrivalRate, "arrival-rate", 0, "R, jobs arriving per second, instead of measuring it")
	fl.Float64Var(&opts.FailureFraction, "failure-fraction", 0, "p, the share of attempts failing transiently (0 to 1), instead of measuring it")
	fl.IntVar(&opts.Retries, "retries", 0, "n, the further attempts a job gets after its first, instead of the cohort's")
	opts.Output = addOutputFlag(cmd, "table", "json")
	return cmd
}

func replayPlanRun(ctx context.Context, opts *ReplayPlanOptions) error {
	svc, err := opts.Planner(ctx)
	if err != nil {
		return err
	}
	p, err := svc.Plan(ctx, opts.ID, opts.Plan)
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, p)
	}
	return renderPlan(opts.IO, p)
}

// renderPlan writes a plan as a table of its figures, each with where it
// came from, then on stderr what was unavailable and the verdict.
func renderPlan(streams *IOStreams, p replay.Plan) error {
	queue := p.WorkQueue
	if queue == "" {
		queue = "unknown"
	}
	fmt.Fprintf(streams.ErrOut, "plan of replay request %d (%s): ceiling %g/s, work queue %s\n",
		p.RequestID, p.Status, p.Ceiling, termsafe.EscapeLine(queue))
	t := newTable(streams, "FIGURE", "VALUE", "FROM").truncatable("FROM")
	t.addRow("arrival_rate", planNumber(p.ArrivalRate), orDash(p.ArrivalRateSource))
	t.addRow("failure_fraction", planNumber(p.FailureFraction), orDash(p.FailureSource))
	t.addRow("attempts", strconv.Itoa(p.Attempts), p.AttemptsSource)
	t.addRow("upper_bound", planNumber(p.UpperBound), "R·(1+n), attempts/s")
	t.addRow("planning_bound", planNumber(p.PlanningBound), "R·(1−p^(n+1))/(1−p), attempts/s")
	ack := "management: acknowledgements on the work queue"
	if p.Consumers != nil && p.Ready != nil {
		ack += fmt.Sprintf(" (%s, %d ready)", phrase.Count(*p.Consumers, "consumer", "consumers"), *p.Ready)
	}
	t.addRow("ack_rate", planNumber(p.AckRate), ack)
	suggested := "-"
	if p.SuggestedRate != nil {
		suggested = fmt.Sprintf("%s: (R + rate)·%s ≤ ack_rate, at most the ceiling", p.LimitedBy, strconv.FormatFloat(p.Amplification, 'f', 4, 64))
	}
	t.addRow("suggested_rate", planNumber(p.SuggestedRate), suggested)
	t.addRow("suggested_upper_bound", planNumber(p.SuggestedUpperBound), "(R + suggested)·(1+n), attempts/s")
	t.addRow("suggested_planning_bound", planNumber(p.SuggestedPlanningBound), "(R + suggested)·amplification, attempts/s")
	if err := t.render(); err != nil {
		return err
	}
	for _, u := range p.Unavailable {
		fmt.Fprintf(streams.ErrOut, "unavailable: %s\n", termsafe.EscapeLine(u))
	}
	_, err := fmt.Fprintln(streams.ErrOut, p.Summary())
	return err
}

// planNumber shows a figure to two decimals, or "-" when it is unknown.
func planNumber(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// detailWithPlan is `replay show -o json`: the request, and a replay's plan
// when one could be made.
type detailWithPlan struct {
	replay.Detail
	Plan *replay.Plan `json:"plan,omitempty"`
}

// showRequestWithPlan is `replay show` without --watch: the request, then
// for a replay its rate plan. A plan that cannot be made is said on stderr
// and leaves the rest of the view as it is.
func showRequestWithPlan(ctx context.Context, opts *ReplayShowOptions, d replay.Detail) error {
	var plan *replay.Plan
	if opts.Planner != nil && d.Kind == replay.KindReplay {
		planned, err := planForShow(ctx, opts.Planner, d.ID)
		if err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "no rate plan: %s\n", termsafe.EscapeLine(err.Error()))
		} else {
			plan = &planned
		}
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, detailWithPlan{Detail: d, Plan: plan})
	}
	return opts.Pager.show(opts.IO, func(streams *IOStreams) error {
		if err := renderRequest(streams, d); err != nil || plan == nil {
			return err
		}
		fmt.Fprintf(streams.Out, "\n%s\n", styles(streams).title.Render("Rate plan (`expiryctl replay plan`)"))
		var text bytes.Buffer
		notes := *streams
		notes.Out, notes.ErrOut = &text, &text
		err := renderPlan(&notes, *plan)
		// The plan's notes are sentences: wrapped, not cut, on a terminal.
		_, werr := io.WriteString(streams.Out, wrapFields(streams, text.String(), 0))
		return errors.Join(err, werr)
	})
}

func planForShow(ctx context.Context, planner func(context.Context) (service.Planner, error), id int64) (replay.Plan, error) {
	svc, err := planner(ctx)
	if err != nil {
		return replay.Plan{}, err
	}
	return svc.Plan(ctx, id, replay.PlanOptions{})
}
