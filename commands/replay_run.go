package commands

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// ReplayRunOptions holds what `expiryctl replay run` needs.
type ReplayRunOptions struct {
	IO     *IOStreams
	Runner func(context.Context) (service.Runner, error)

	ID     int64
	DryRun bool
	Output *outputFormat

	// progress is the progress line on stderr; nil: newProgressLine.
	progress *progressLine
}

func (o *ReplayRunOptions) progressLine() *progressLine {
	if o.progress == nil {
		o.progress = newProgressLine(o.IO.ErrOut)
	}
	return o.progress
}

// NewCmdReplayRun builds `expiryctl replay run`.
func NewCmdReplayRun(f *Factory, runF func(context.Context, *ReplayRunOptions) error) *cobra.Command {
	opts := &ReplayRunOptions{IO: f.IO, Runner: f.Runner}
	cmd := &cobra.Command{
		Use:   "run REQ",
		Short: "Run an approved request (or resume one whose runner died)",
		Long: `Run an approved replay or discard request.

` + runWhereHelp() + `

The run holds the request's rate ceiling and paces itself under it: while the
consumers of the target queue fall behind (its ready count grows, or their ack
rate falls with work waiting, as the system's live view shows them) it lowers
its rate, and raises it back toward the ceiling, never above, once they recover.
The progress line shows the current rate limit and why. Without a live view the
run keeps the fixed ceiling and says so. It marks an item confirmed only after
its system took it: a publisher confirm without a return, a send's answer, a
committed retry. The first "canary" items go out alone; the run then waits the
canary window and halts if they die again (a canary of the whole cohort, as for
one letter, holds nothing back: that run has no canary phase). It halts, too,
when the share of failed publishes, the depth of the target queue or the share
of replayed letters dying again passes the request's stop conditions; a halted
request needs a new approval. The policy's eligibility query, when set, runs
before each item, against the reservation database of --outcome-url like the
outcome query; ineligible items are skipped. The run captures the dead-letter
queues its cohort came from while it runs and for the canary window after
(shorter once the outcome query saw every reservation done: a job whose work is
done is not coming back), so that it sees the jobs that die again without a
separate ` + "`dlq ingest --follow`" + `; it refuses to start (rule dlq-unwatched) when it
cannot, unless the request said --unwatched.

When the policy sets an outcome query, the run asks it, in batches and off
the publishing path, whether each confirmed item's reservation reached its
terminal state, when, and whether the transition was a duplicate (its
idempotency key already recorded). It runs against the reservation database
named by --outcome-url (or EXPIRYCTL_OUTCOME_URL; never stored, and its
password never shown), else against expiryctl's own. The progress line shows
the terminal-state latency (p50/p99 from publish to transition) and the
conflicts; each item's outcome is recorded (` + "`replay show`" + ` reports them).
The canary passes, and the run completes, only once every outcome is known
or its window (policy outcome_window) passed; the run halts when the share
of items past the window and not terminal passes stop_unsettled_ratio, or
the share of conflicts passes stop_conflict_ratio.

Starting a run spends the approval. If the runner dies (kill, crash, lost
connection), run the request again: it resumes without a new approval,
publishing again the items that were in flight; the worker's idempotency key
makes those duplicates harmless. Delivery is at least once, at most ` + strconv.Itoa(replay.PublishBound) + `
times per approval: each publish is counted in the database before it is
sent, and an item sent ` + strconv.Itoa(replay.PublishBound) + ` times with no broker answer recorded is not
sent again but ends failed, its reason naming rule publish-bound; only a new
request sends its letter again. Only one runner can hold a request at a time.
Given a cluster's nodes (--amqp-url repeated or comma-separated), a run that
loses its node does not stop: it says so on stderr, connects to the next
node and goes on, resuming there in the same way (at most 5 times, and
for 30 s after each loss).

A discard request marks its letters discarded and publishes nothing.

--dry-run publishes nothing and changes nothing: it lists what a run would do
with each item (replay, skip or block) and why. It works on any open request,
so an approver can look before approving.`,
		Example: `  expiryctl replay run 7
  expiryctl replay run 7 --outcome-url "postgres://expiryctl_ro@reservations-db:5432/reservations"
  expiryctl replay run 7 --dry-run
  expiryctl replay run 7 -o json | jq .status`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("replay run takes one request id, e.g. `expiryctl replay run 7`")
			}
			if id, err := strconv.ParseInt(args[0], 10, 64); err != nil || id <= 0 {
				return flagErrorf("invalid request id %q: use the number `expiryctl replay list` shows", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, _ = strconv.ParseInt(args[0], 10, 64)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return replayRunRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "publish nothing, change nothing: say what a run would do with each item")
	cmd.Flags().StringVar(&f.KeyringFlag, "keyring", "",
		"run only approvals signed by a key in this file or directory of approvers' verifier keys (env EXPIRYCTL_KEYRING)")
	cmd.Flags().BoolVar(&f.RequireSignedFlag, "require-signed-approvals", false,
		"refuse unsigned approvals (env EXPIRYCTL_REQUIRE_SIGNED_APPROVALS=1); needs --keyring to run anything")
	cmd.Flags().StringVar(&f.OutcomeURLFlag, "outcome-url", "",
		"the reservation database the policy's eligibility and outcome queries run against, with a read-only login (env EXPIRYCTL_OUTCOME_URL; default: expiryctl's database)")
	opts.Output = addOutputFlag(cmd, "table", "json")
	return cmd
}

func replayRunRun(ctx context.Context, opts *ReplayRunOptions) error {
	runner, err := opts.Runner(ctx)
	if err != nil {
		return err
	}
	if opts.DryRun {
		return replayDryRun(ctx, opts, runner)
	}

	line := opts.progressLine()
	failovers := 0
	progress := func(p replay.Progress) {
		// A failover is said on its own line, terminal or not.
		for ; failovers < len(p.Failovers); failovers++ {
			if opts.IO.StderrTTY {
				line.clear()
			}
			fmt.Fprintln(opts.IO.ErrOut, failoverLine(p.RequestID, p.Failovers[failovers]))
		}
		if opts.IO.StderrTTY && p.Phase != "stopping" && p.Phase != "failover" {
			line.show(runProgressLine(p))
		}
	}
	res, runErr := runner.Run(ctx, opts.ID, progress)
	if opts.IO.StderrTTY {
		line.clear()
	}
	if res.Status == "" {
		// Refused before it started: the error says why.
		return runErr
	}
	if err := renderRunResult(opts, res); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return runErr
	}
	if res.Status == replay.StatusCompleted && len(res.FailedItems) > 0 {
		return fmt.Errorf("replay request %d completed, but %s failed to publish (below the stop condition, so the run did not halt): their letters are back in the archive as dead; fix the cause and make a new request for them (`expiryctl dlq list --status dead`)",
			res.RequestID, phrase.Count(len(res.FailedItems), "item", "items"))
	}
	return nil
}

func renderRunResult(opts *ReplayRunOptions, res replay.RunResult) error {
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, res)
	}
	t := newTable(opts.IO, "REQUEST", "KIND", "STATUS", "CONFIRMED", "SKIPPED", "FAILED", "PUBLISHED", "ELAPSED", "HALT-REASON").truncatable("HALT-REASON")
	t.addRow(strconv.FormatInt(res.RequestID, 10), string(res.Kind), string(res.Status), strconv.Itoa(res.Confirmed),
		strconv.Itoa(res.Skipped), strconv.Itoa(res.Failed), strconv.Itoa(res.Published),
		(time.Duration(res.Elapsed * float64(time.Second))).Round(time.Millisecond).String(), orDash(res.HaltReason))
	if err := t.render(); err != nil {
		return err
	}
	if len(res.FailedItems) > 0 {
		fmt.Fprintln(opts.IO.Out)
		ft := newTable(opts.IO, "FAILED-ITEM", "REASON").truncatable("REASON")
		for _, f := range res.FailedItems {
			ft.addRow(strconv.FormatInt(f.DeadLetterID, 10), f.Reason)
		}
		if err := ft.render(); err != nil {
			return err
		}
	}
	if res.Outcomes != nil {
		fmt.Fprintf(opts.IO.ErrOut, "replay request %d: %s\n", res.RequestID, res.Outcomes.Line())
	}
	switch {
	case res.Status == replay.StatusCompleted && res.Kind == replay.KindDiscard:
		// A discard publishes nothing: its letters are marked never to retry.
		fmt.Fprintf(opts.IO.ErrOut, "discard request %d completed: %s discarded, %d skipped\n",
			res.RequestID, phrase.Count(res.Confirmed, "letter", "letters"), res.Skipped)
	case res.Status == replay.StatusCompleted:
		fmt.Fprintf(opts.IO.ErrOut, "replay request %d completed: %d confirmed, %d skipped, %d failed (%d published by this run",
			res.RequestID, res.Confirmed, res.Skipped, res.Failed, res.Published)
		if res.Republished > 0 {
			fmt.Fprintf(opts.IO.ErrOut, ", %d of them again after an earlier runner stopped", res.Republished)
		}
		fmt.Fprintln(opts.IO.ErrOut, ")")
	case res.Resumed:
		fmt.Fprintf(opts.IO.ErrOut, "%s request %d was resumed and is now %s\n", res.Kind, res.RequestID, res.Status)
	}
	switch {
	case res.Checked:
		fmt.Fprintf(opts.IO.ErrOut, "replay request %d: its approval was signed by the approver and checked against this runner's keyring\n", res.RequestID)
	case res.Signed:
		fmt.Fprintf(opts.IO.ErrOut, "replay request %d: its approval is signed, and this runner has no keyring to check it (--keyring)\n", res.RequestID)
	default:
		fmt.Fprintf(opts.IO.ErrOut, "replay request %d: its approval is unsigned, and this runner does not require signatures (--keyring)\n", res.RequestID)
	}
	return nil
}

func replayDryRun(ctx context.Context, opts *ReplayRunOptions, runner service.Runner) error {
	res, err := runner.DryRun(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, res)
	}
	// Numbered from 1 as `replay show` numbers the cohort, so that the two
	// views name an item alike.
	t := newTable(opts.IO, "#", "LETTER", "RESERVATION", "STATE", "ACTION", "TARGET", "WHY").truncatable("WHY", "TARGET", "RESERVATION")
	for _, it := range res.Items {
		t.addRow(strconv.Itoa(it.Ordinal+1), strconv.FormatInt(it.DeadLetterID, 10), orDash(it.ReservationID), it.State,
			it.Action, orDash(it.Target), orDash(it.Reason))
	}
	if err := t.render(); err != nil {
		return err
	}
	for _, q := range res.DeadLetterQueues {
		switch {
		case q.By != "":
			fmt.Fprintf(opts.IO.ErrOut, "dead-letter queue %s: the run captures it, to see its jobs die again\n", termsafe.Quote(q.Queue))
		case res.Request.UnwatchedWhy != "":
			fmt.Fprintf(opts.IO.ErrOut, "dead-letter queue %s: not captured (%s); the request says --unwatched: %s\n",
				termsafe.Quote(q.Queue), termsafe.EscapeLine(q.Unwatched), termsafe.EscapeLine(res.Request.UnwatchedWhy))
		default:
			fmt.Fprintf(opts.IO.ErrOut, "dead-letter queue %s: cannot be captured (%s): a run would be refused by rule dlq-unwatched\n",
				termsafe.Quote(q.Queue), termsafe.EscapeLine(q.Unwatched))
		}
	}
	fmt.Fprintf(opts.IO.ErrOut, "dry run of %s request %d (%s): %d replay, %d skip, %d block, %d discard, %d already done; nothing was published or changed\n",
		res.Request.Kind, res.Request.ID, res.Request.Status, res.Counts["replay"], res.Counts["skip"], res.Counts["block"],
		res.Counts["discard"], res.Counts["done"])
	return nil
}
