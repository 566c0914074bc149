package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Runner runs approved requests: it publishes a replay's frozen cohort back
// to where each job came from, or marks a discard's letters discarded.
//
// A run is at least once, at most PublishBound times per approval, and
// never more than authorised. Items are marked "publishing" (committed)
// before they are published and "confirmed" only after the broker acked
// them without returning them, so a crash leaves every item either decided
// or "publishing", and running the request again resumes: "publishing"
// items are published again with the same identity, which the worker's
// idempotency key makes harmless. Each publish is cleared in the database
// just before it goes out (replay_items_send, which counts it), and an item
// cleared PublishBound times with no broker answer recorded is not
// published again but fails. Only items of the request, read by its id, are
// ever published.
//
// Two runners cannot run one request: the run holds the request's lease
// (a row of replay_runner_leases naming a dedicated connection), which is
// free once that session ends, however it ends.
type Runner struct {
	// Pool is the expiryctl database.
	Pool *pgxpool.Pool
	// Broker publishes and inspects queues; required for replay requests
	// (a discard publishes nothing).
	Broker Broker
	// Actor runs the request: recorded on the audit rows and sent as
	// x-replayed-by.
	Actor string
	// Connection is the name of the connection Broker publishes through,
	// which the letters the run's capture of its dead-letter queues
	// stores record; empty: the archive's rule (a job store's letter's is
	// its queue name's).
	Connection string
	// Now is the clock for elapsed time, rates and ETA (default time.Now).
	// The database's clock decides approval expiry and the canary window.
	Now func() time.Time
	// Progress, when set, is called from the run's goroutine about five
	// times a second and once at the end; it must not block for long.
	Progress func(Progress)
	// Outcomes is the reservation database the policy's eligibility and
	// outcome queries run against (nil: Pool). It is the caller's to open and close: its URL
	// may carry a password, so it is never stored with the policy.
	Outcomes *pgxpool.Pool
	// Flow, when set, paces a replay by the consumers of its target
	// queues: the rate drops below the request's ceiling while they fall
	// behind and climbs back when they recover, never above it (see
	// run_pace.go). Nil keeps the ceiling.
	Flow Flow
	// Consumers reads who consumes the queues a replay's targets route to
	// (the system's live view), for the handler check before the run
	// starts and at each check while it runs (see handler.go). Without it a
	// replay starts only when its request says SameHandlerOK.
	Consumers Consumers
	// Reconnect, when set, lets a replay go on after it lost the broker it
	// publishes through (a node of a cluster stopping): it returns a broker
	// on another node, and the run continues there under the same lock, as
	// a second run would resume (see run_failover.go). Run replaces Broker
	// with each broker Reconnect returns; closing them stays with whoever
	// made them. Nil: a lost broker interrupts the run.
	Reconnect func(ctx context.Context) (Broker, error)
	// OpenDLQ opens a consumer on a dead-letter queue, for the run to
	// capture the queues its cohort came from while it runs, so that it
	// sees its jobs die again (see run_dlq_watch.go). Nil: the run captures
	// none, and starts only when its request says --unwatched.
	OpenDLQ OpenDLQ
	// Approvals, when it enforces anything, is checked in the transaction
	// that starts the run, before anything is published: a refused
	// approval starts nothing and spends nothing.
	Approvals *ApprovalCheck

	// The tunables below are for this package's tests; zero means the
	// default. None of them can loosen a governance limit: the rate
	// ceiling and the stop conditions come from the request alone.
	checkEvery   time.Duration // stop-condition checks (default 500ms)
	window       int           // unconfirmed publishes in flight (default 1000)
	minAttempts  int           // publishes before the failure ratio is judged mid-run (default 10)
	outcomeEvery time.Duration // outcome polls (default 1s)
	paceEvery    time.Duration // reads of Flow (default 1s)
	maxFailovers int           // failovers in one run (default 5)
	failoverWait time.Duration // tries of Reconnect after one loss (default 30s)
}

// Progress is a snapshot of a run for a progress display.
type Progress struct {
	RequestID int64
	Kind      Kind
	// Phase is "canary", "canary-wait", "replay", "not-before" (waiting
	// for WaitUntil), "settling" (waiting for outcomes), "watching" (all
	// confirmed, watching CanaryLeft more for letters coming back),
	// "discard" or "stopping".
	Phase string
	// WaitUntil, in phase "not-before", is when the next item may go: the
	// request's --not-before, its letter's Retry-After or its hold's
	// deadline.
	WaitUntil time.Time
	// Total is the cohort size; Done counts items decided (confirmed,
	// skipped or failed) over the request's whole life.
	Total, Done                int
	Confirmed, Skipped, Failed int
	// InFlight is publishes waiting for the broker's confirm.
	InFlight int
	// Published counts publishes in this run; Rate is their rate over
	// the time the run could publish, its waits (the canary window, the
	// waits for outcomes) left out.
	Published int
	Rate      float64
	// ETA estimates a replay's time left: what is left of the canary
	// window while it waits, then the items left at Rate, at most Pace;
	// so it counts down through the canary's wait. Zero when unknown.
	ETA time.Duration
	// CanaryLeft is the time left in the canary window while waiting.
	CanaryLeft time.Duration
	// Outcomes is what the policy's outcome query said so far of the
	// items this run confirmed; nil when the policy sets no query.
	Outcomes *OutcomeStats
	// Pace is the rate the run allows itself now, at most the request's
	// ceiling, and PaceWhy why (a replay's only).
	Pace    float64
	PaceWhy string
	// Elapsed is the time since this run started.
	Elapsed time.Duration
	// Stops are the stop conditions as the run last judged them.
	Stops Readings
	// Failovers are this run's moves to another node of the broker, in
	// order; Phase is "failover" in the call that reports a new one.
	Failovers []Failover
}

// RunResult is what a run did. Counts are over the request's whole life,
// across resumed runs; Published and Republished are this run's.
type RunResult struct {
	RequestID int64  `json:"request_id"`
	Kind      Kind   `json:"kind"`
	Status    Status `json:"status"`
	// Resumed is true when the run continued a request found running (its
	// earlier runner died or was stopped).
	Resumed bool `json:"resumed"`
	Items   int  `json:"items"`
	// Signed says the approval run carried the approver's signed
	// statement; Checked that this runner verified it against its keyring.
	Signed    bool `json:"approval_signed"`
	Checked   bool `json:"approval_checked"`
	Confirmed int  `json:"confirmed"`
	Skipped   int  `json:"skipped"`
	Failed    int  `json:"failed"`
	// Published counts the messages this run published; Republished those
	// of them that an earlier run had already marked publishing (possibly
	// sent before it died).
	Published   int     `json:"published"`
	Republished int     `json:"republished"`
	Elapsed     float64 `json:"elapsed_seconds"`
	HaltReason  string  `json:"halt_reason,omitempty"`
	// HaltCondition names the stop condition that halted the run.
	HaltCondition string `json:"halt_condition,omitempty"`
	// FailedItems lists the items that failed (in this or an earlier run).
	FailedItems []ItemOutcome `json:"failed_items,omitempty"`
	// Outcomes is what the policy's outcome query said of the items this
	// run confirmed; nil when the policy sets no query.
	Outcomes *OutcomeStats `json:"outcomes,omitempty"`
	// Failovers are this run's moves to another node of the broker.
	Failovers []Failover `json:"failovers,omitempty"`
}

// ItemOutcome is one item's end state and why.
type ItemOutcome struct {
	DeadLetterID int64  `json:"dead_letter_id"`
	State        string `json:"state"`
	Reason       string `json:"reason,omitempty"`
}

// HaltError reports a run stopped by a stop condition (the request is now
// halted and needs a new approval) or by someone cancelling the request.
type HaltError struct {
	RequestID int64
	// Condition is failure-ratio, queue-depth, redead-ratio, eligibility,
	// unsettled-ratio, conflict-ratio, outcome-query or cancelled.
	Condition string
	// Reason is the numbers behind it, as recorded in halt_reason.
	Reason string
	// consumers is what the check that halted it saw, for the audit row.
	consumers *Observation
}

func (e *HaltError) Error() string {
	if e.Condition == "cancelled" {
		return fmt.Sprintf("replay request %d was cancelled while it ran (%s): the runner stopped publishing; letters not replayed are back in the archive",
			e.RequestID, e.Reason)
	}
	return fmt.Sprintf("replay request %d halted by stop condition %s: %s; fix the cause, then an approver must approve it again (`expiryctl replay approve %d`) before `expiryctl replay run %d` resumes it",
		e.RequestID, e.Condition, e.Reason, e.RequestID, e.RequestID)
}

// InterruptedError reports a run that stopped before finishing without
// changing the request's status: interrupted, or the queue system or
// PostgreSQL failed. The request stays running and the next `replay run` resumes it.
type InterruptedError struct {
	RequestID int64
	// Unconfirmed counts items published whose confirm never came; they
	// stay "publishing" and are published again on resume.
	Unconfirmed int
	// Unrecorded counts items the broker acked whose confirm could not be
	// recorded (PostgreSQL was lost): they reached the queue, stay
	// "publishing" and are published again on resume.
	Unrecorded int
	// Unanswered counts items the broker nacked or returned whose failure
	// could not be recorded; they stay "publishing" too.
	Unanswered int
	// Unsent counts items this run marked publishing and never sent that
	// it could not put back to pending: they go out on resume, for the
	// first time.
	Unsent int
	Err    error
}

func (e *InterruptedError) Error() string {
	again := e.Unconfirmed + e.Unrecorded + e.Unanswered
	var doubt string
	switch {
	case again == 0:
		doubt = "no published item is left in doubt"
	case e.Unrecorded == 0 && e.Unanswered == 0:
		doubt = fmt.Sprintf("%d published %s no confirm and will be published again on resume (the job's idempotency key absorbs a copy that did arrive)",
			again, plural(again, "item got", "items got"))
	default:
		var none string
		if e.Unconfirmed > 0 {
			none = fmt.Sprintf("%d got no confirm, ", e.Unconfirmed)
		}
		doubt = fmt.Sprintf("%d published %s left publishing with their broker answer unrecorded and will be published again on resume (%s%d were confirmed by the broker but could not be recorded, so their copy is on the queue already; the job's idempotency key absorbs the second)",
			again, plural(again, "item is", "items are"), none, e.Unrecorded)
		if e.Unanswered > 0 {
			doubt += fmt.Sprintf(", %d refused by the broker will be tried again", e.Unanswered)
		}
	}
	if e.Unsent > 0 {
		doubt += fmt.Sprintf("; %d marked publishing but never sent will go out then", e.Unsent)
	}
	if e.Interrupted() {
		// Said for whoever pressed Ctrl-C at 3 a.m.: a stop they asked for
		// must not read as the request being cancelled or anything lost.
		return fmt.Sprintf("replay request %d is still running, but no runner publishes it now: this run was interrupted. Nothing was lost: nothing was marked confirmed without the broker's ack, %s. Resume it with `expiryctl replay run %d` (no new approval needed)",
			e.RequestID, doubt, e.RequestID)
	}
	return fmt.Sprintf("replay request %d stopped before finishing: %v; nothing was marked confirmed without the broker's ack, %s: run `expiryctl replay run %d` again to resume (no new approval needed)",
		e.RequestID, e.Err, doubt, e.RequestID)
}

// Interrupted reports whether the run stopped because its caller asked it
// to (Ctrl-C, SIGTERM, a TUI's stop), not because a server failed.
func (e *InterruptedError) Interrupted() bool { return errors.Is(e.Err, context.Canceled) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// Halt conditions.
const (
	ConditionFailureRatio = "failure-ratio"
	ConditionQueueDepth   = "queue-depth"
	ConditionRedeadRatio  = "redead-ratio"
	ConditionEligibility  = "eligibility"
	ConditionCancelled    = "cancelled"
	// ConditionUnsettledRatio: too many confirmed items did not reach
	// their terminal state within the policy's outcome window.
	ConditionUnsettledRatio = "unsettled-ratio"
	// ConditionConflictRatio: too many transitions were idempotency
	// conflicts (the key was already recorded).
	ConditionConflictRatio = "conflict-ratio"
	// ConditionOutcomeQuery: the policy's outcome query failed.
	ConditionOutcomeQuery = "outcome-query"
)

// HaltConditions are the stop conditions a run halts on (a cancel is not
// a halt: it has its own audit action).
func HaltConditions() []string {
	return []string{ConditionFailureRatio, ConditionQueueDepth, ConditionRedeadRatio, ConditionEligibility,
		ConditionUnsettledRatio, ConditionConflictRatio, ConditionOutcomeQuery}
}

func (r *Runner) tables() tables { return onPostgres(r.Pool) }

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) checkInterval() time.Duration {
	if r.checkEvery > 0 {
		return r.checkEvery
	}
	return 500 * time.Millisecond
}

func (r *Runner) windowSize() int {
	if r.window > 0 {
		return r.window
	}
	return 1000
}

func (r *Runner) minFailureAttempts() int {
	if r.minAttempts > 0 {
		return r.minAttempts
	}
	return 10
}

// Run runs request id: an approved request starts (spending its approval),
// a running one whose runner is gone resumes. Anything else is refused with
// a *Refusal naming the rule, as is a request another runner holds
// (rule "single-runner"). A stop condition halts the request and returns a
// *HaltError; an interruption leaves it running and returns an
// *InterruptedError. The result is filled in either way.
func (r *Runner) Run(ctx context.Context, id int64) (RunResult, error) {
	start := r.now()
	res := RunResult{RequestID: id}
	svc := &Service{Pool: r.Pool, Actor: r.Actor}
	req, reqErr := r.tables().RequestGet(ctx, id)
	if r.Broker == nil && reqErr == nil && req.Kind == KindReplay {
		// Said before the run spends the approval.
		return res, fmt.Errorf("replay request %d publishes, and the runner has no connection to its queue system", id)
	}
	lock, err := r.acquire(ctx, id)
	if err != nil {
		svc.recordRefusal(ctx, "replay.run", requestTarget(id), err, map[string]any{})
		return res, err
	}
	defer lock.release()

	// What consumes the targets now, for the database's handler check.
	var seen *Observation
	if reqErr == nil && req.Kind == KindReplay && (r.Consumers != nil || !req.SameHandlerOK) {
		obs := r.observe(ctx, req)
		seen = &obs
	}
	// The dead-letter queues the cohort came from, captured from now until
	// the run's watch window closes, for the database's dlq-unwatched check.
	var dlqs *dlqWatch
	if reqErr == nil && req.Kind == KindReplay {
		queues, err := r.tables().RunWatchedQueues(ctx, id)
		if err != nil {
			return res, err
		}
		dlqs = r.watchDLQs(ctx, queues)
		defer dlqs.stop()
	}
	st, err := r.begin(ctx, id, seen, dlqs)
	if err != nil {
		svc.recordRefusal(ctx, "replay.run", requestTarget(id), err, map[string]any{"consumers": seen, "dlq_watch": dlqs.watched()})
		var refusal *Refusal
		if errors.As(err, &refusal) && refusal.Rule == "approval-ttl" {
			_ = inTx(context.WithoutCancel(ctx), r.Pool, func(t tables) error { return t.RequestExpireStale(ctx, r.Actor) })
		}
		return res, err
	}
	st.lock = lock
	st.start = start
	st.dlqs = dlqs
	res.Kind, res.Resumed, res.Items = st.req.Kind, st.resumed, st.req.Items
	res.Signed, res.Checked = st.req.ApprovalNote != "", r.Approvals.enforced()

	switch st.req.Kind {
	case KindDiscard:
		err = r.discard(ctx, st)
	case KindReplay:
		if r.Broker == nil {
			err = r.interrupt(ctx, st, errors.New("no connection to the queue system to publish with"), nil, 0)
		} else {
			err = r.replayAcrossFailovers(ctx, st)
		}
	default:
		err = fmt.Errorf("replay request %d has unknown kind %q", id, st.req.Kind)
	}
	r.report(st, "stopping")
	res.Status = st.status
	res.Confirmed, res.Skipped, res.Failed = st.confirmed, st.skipped, st.failed
	res.Published, res.Republished = st.published, st.republished
	res.HaltReason, res.HaltCondition = st.haltReason, st.haltCondition
	res.FailedItems = st.failedItems
	res.Outcomes = st.outcomes
	res.Failovers = st.failovers
	res.Elapsed = r.now().Sub(start).Seconds()
	return res, err
}

// runState is one run's bookkeeping.
type runState struct {
	req Request
	// label is the name the run records beside its login (the actor, or
	// the login itself) and sends as x-replayed-by.
	label   string
	pol     Policy
	lock    *runLock
	resumed bool
	start   time.Time
	status  Status

	// Over the request's life.
	confirmed, skipped, failed int
	// This run.
	published, republished int
	attempted, failedRun   int
	// confirmedRun counts the items confirmed under this approval: by
	// earlier legs of the run, killed and resumed, and by this one.
	confirmedRun int
	// redeadBase is the letters of this request that had died again
	// before this run started, but for those of the items its earlier legs
	// confirmed; the re-dead ratio counts only the others.
	redeadBase int
	// owedUntil is when the watch window of the items earlier legs
	// confirmed closes; zero when none is open.
	owedUntil time.Time
	// maxOrdinal is the last item's ordinal (item_count-1 as Create
	// numbers them).
	maxOrdinal int

	phase      string
	waits      runWaits
	lastReport time.Time
	inFlight   int
	canaryLeft time.Duration
	// canarySent counts the canary's publishes by this run, for its
	// readings.
	canarySent    int
	haltReason    string
	haltCondition string
	failedItems   []ItemOutcome
	// watch watches the outcomes while the run publishes; outcomes is its
	// last word once it stopped.
	watch    *outcomeWatch
	outcomes *OutcomeStats
	// pace is a replay's pacer.
	pace *pacer
	// readings are what the last check read; canaryPassed is set once
	// this approval's canary passed.
	readings     Readings
	canaryPassed bool
	// failovers are the run's moves to another node of the broker.
	failovers []Failover
	// recorder is the current leg's recorder (a failover starts another),
	// for the outcome watcher, which outlives a leg.
	recorder atomic.Pointer[recorder]
	// dlqs are the run's captures of its cohort's dead-letter queues.
	dlqs *dlqWatch
	// holdUntil, in Unix nanoseconds, is when the item the run waits for
	// may go; 0 while it waits for none (see preparer.hold).
	holdUntil atomic.Int64
}

func (st *runState) done() int { return st.confirmed + st.skipped + st.failed }

// begin moves an approved request to running (the database spends the
// approval, once the consumers seen pass its handler check) or takes over
// a running one, and audits the start.
func (r *Runner) begin(ctx context.Context, id int64, seen *Observation, dlqs *dlqWatch) (*runState, error) {
	st := &runState{}
	watched, err := dlqs.observation()
	if err != nil {
		return nil, err
	}
	err = inTx(ctx, r.Pool, func(t tables) error {
		var err error
		if st.resumed, st.label, err = t.RunStart(ctx, r.Actor, id, seen, watched); err != nil {
			return err
		}
		if st.req, err = t.RequestGet(ctx, id); err != nil {
			return err
		}
		if r.Approvals.enforced() {
			_, database, err := t.SessionIdentity(ctx)
			if err != nil {
				return err
			}
			if err := r.Approvals.check(st.req, database, r.now()); err != nil {
				return err
			}
		}
		if st.pol, err = t.PolicyGet(ctx); err != nil {
			return err
		}
		if st.pol.SignedApprovals && !r.Approvals.enforced() {
			return refuse("signed-approval", "the policy requires every runner to check signed approvals, and this runner has no keyring: "+
				"run with --keyring (or EXPIRYCTL_KEYRING), the approvers' verifier keys")
		}
		st.status = StatusRunning
		states, err := t.ItemsCountByState(ctx, id)
		if err != nil {
			return err
		}
		st.confirmed, st.skipped, st.failed = states["confirmed"], states["skipped"], states["failed"]
		if st.redeadBase, err = t.RunRedeadLettered(ctx, id); err != nil {
			return err
		}
		owed, err := t.RunWatchOwed(ctx, id)
		if err != nil {
			return err
		}
		st.confirmedRun, st.redeadBase = owed.Confirmed, st.redeadBase-owed.CameBack
		if owed.WindowLeft > 0 {
			st.owedUntil = time.Now().Add(owed.WindowLeft)
		}
		st.maxOrdinal, err = t.ItemsMaxOrdinal(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// report calls Progress, at most five times a second unless phase changed
// or the run ends.
func (r *Runner) report(st *runState, phase string) {
	if r.Progress == nil {
		return
	}
	now := r.now()
	var holdUntil time.Time
	if h := st.holdUntil.Load(); h != 0 && (phase == "replay" || phase == "canary") {
		phase, holdUntil = "not-before", time.Unix(0, h)
	}
	if phase == st.phase && phase != "stopping" && now.Sub(st.lastReport) < 200*time.Millisecond {
		return
	}
	st.phase, st.lastReport = phase, now
	st.waits.observe(phase, now, st.published)
	p := Progress{RequestID: st.req.ID, Kind: st.req.Kind, Phase: phase, Total: st.req.Items, Done: st.done(),
		Confirmed: st.confirmed, Skipped: st.skipped, Failed: st.failed, Published: st.published,
		InFlight: st.inFlight, CanaryLeft: st.canaryLeft, Outcomes: st.outcomes,
		Elapsed: now.Sub(st.start), Stops: st.currentReadings(phase), Failovers: st.failovers, WaitUntil: holdUntil}
	if st.watch != nil && st.outcomes == nil {
		s, _ := st.watch.snapshot()
		p.Outcomes = &s
	}
	if st.pace != nil {
		p.Pace, p.PaceWhy = st.pace.rate, st.pace.why
	}
	p.Rate = publishRate(st.published, st.waits.stretches(st.published), burstFor(st.req.Rate), now.Sub(st.start), st.waits.total(now))
	if st.req.Kind == KindReplay {
		pace := p.Pace
		if pace <= 0 {
			pace = st.req.Rate
		}
		waitLeft := time.Duration(0)
		switch phase {
		case "canary-wait", "watching":
			waitLeft = st.canaryLeft
		case "not-before":
			waitLeft = max(holdUntil.Sub(now), 0)
		}
		p.ETA = estimateETA(st.req.Items-p.Done, p.Rate, pace, waitLeft)
	}
	r.Progress(p)
}

// discard marks every open item's letter discarded, a window of ordinals
// per transaction, checking at each that the request still runs.
func (r *Runner) discard(ctx context.Context, st *runState) error {
	const chunk = 500
	id := st.req.ID
	for lo := 0; lo <= st.maxOrdinal; lo += chunk {
		if err := ctx.Err(); err != nil {
			return r.interrupt(ctx, st, err, nil, 0)
		}
		n, stopped, err := r.tables().RunDiscardWindow(context.WithoutCancel(ctx), id, lo, lo+chunk-1)
		if err != nil {
			return r.interrupt(ctx, st, err, nil, 0)
		}
		if stopped != "" {
			return r.stopped(ctx, st, stopped)
		}
		st.confirmed += n
		r.report(st, "discard")
	}
	return r.complete(ctx, st)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// truncateWords is s in at most n bytes for a person to read: cut at the
// last space that fits, and "…" said where it was cut, never mid-word.
func truncateWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := truncateText(s, n-len("…"))
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return cut + "…"
}
