// Package backend is what the terminal UI is given: Services, the services
// it calls. The archive and the requests are the services the commands call
// too, declared in internal/service and built by the commands' Factory
// (commands/services.go). The run and audit screens call Runner and
// AuditTrail, declared here because they speak the screens' language (a
// run's canary state, an audit row as text); commands/tui_services.go
// adapts service.Runner and service.AuditReviewer to them. Tests pass the
// fakes of internal/fixture/fakes and tui/internal/tuitest.
//
// Nothing here opens a connection: the TUI only calls what it is given.
package backend

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// Runner runs an approved request and reports its progress. Run blocks until
// the run completes, halts on a stop condition, is cancelled (the request's
// status became cancelled, or ctx ended) or fails; it calls progress from its
// own goroutine as often as it likes (the TUI keeps only the latest value and
// redraws at most a few times a second). The TUI cancels ctx when the
// operator quits while a run is going; the runner should then stop at a safe
// point so that a later `replay run` resumes.
type Runner interface {
	Run(ctx context.Context, id int64, progress func(RunProgress)) (RunSummary, error)
}

// CanaryState is where a run's canary stands.
type CanaryState string

// The canary states a runner reports. An empty state means the request has
// no canary; pending, that it is not published yet; stopped, that the run
// stopped before it passed (a resume goes on with it).
const (
	CanaryNone    CanaryState = ""
	CanaryPending CanaryState = "pending"
	CanarySending CanaryState = "sending"
	CanaryWaiting CanaryState = "waiting"
	CanaryPassed  CanaryState = "passed"
	CanaryFailed  CanaryState = "failed"
	CanaryStopped CanaryState = "stopped"
)

// RunProgress is a snapshot of a run.
type RunProgress struct {
	// Total is the cohort size; Done counts items settled either way
	// (Confirmed + Failed + Skipped).
	Total, Done int
	// Confirmed were published and confirmed by the broker; Failed gave up;
	// Skipped were not published (ineligible, already done, …).
	Confirmed, Failed, Skipped int
	// Published counts this run's publishes and InFlight those waiting for
	// the broker's confirm.
	Published, InFlight int
	// Rate is this run's publishes per second since it started; Limit the
	// request's ceiling.
	Rate, Limit float64
	// Canary is the canary's state and CanaryItems its size.
	Canary      CanaryState
	CanaryItems int
	// Checked is false until the run's first check read the target queue
	// and the re-dead letters: before it, QueueDepth and Redead are
	// unknown, not zero.
	Checked bool
	// FailureRatio, QueueDepth and RedeadRatio are the stop conditions'
	// values as the run last judged them, compared in the view with Stop:
	// FailureRatio is FailedRun of this run's Attempted publishes,
	// QueueDepth the deepest target queue (DepthQueue), RedeadRatio the
	// Redead letters captured again of the ConfirmedRun items this run
	// confirmed.
	FailureRatio         float64
	Attempted, FailedRun int
	QueueDepth           int
	DepthQueue           string
	RedeadRatio          float64
	Redead, ConfirmedRun int
	// Stop is the request's stop conditions.
	Stop replay.StopConditions
	// Halted names the stop condition that halted the run (replay's
	// Condition* names); empty otherwise.
	Halted string
	// Elapsed is the time since the run started.
	Elapsed time.Duration
	// Note is a short line the runner wants shown ("waiting 30s for the
	// canary", "target queue at 9500/10000: slowing down").
	Note string
	// Outcomes is what the policy's outcome query said so far of the
	// confirmed items (terminal latency, conflicts, unsettled); nil when
	// the policy sets no query.
	Outcomes *replay.OutcomeStats
}

// RunSummary is how a run ended.
type RunSummary struct {
	// Status is the request's status afterwards: completed, halted or
	// cancelled.
	Status replay.Status
	// HaltReason says which stop condition halted it, or who cancelled it.
	HaltReason string
	Final      RunProgress
}

// AuditFilter narrows the audit listing. Zero fields do not filter; set
// fields must match exactly.
type AuditFilter struct {
	Actor, Action, Target string
}

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	Seq     int64
	At      time.Time
	Actor   string
	DBRole  string
	Action  string
	Target  string
	Outcome string
	// Details is the row's details as JSON text.
	Details string
}

// AuditPage is one page of the trail, newest first.
type AuditPage struct {
	Entries []AuditEntry
	// Next is the seq to pass as before for the next (older) page; 0 on the
	// last page.
	Next int64
}

// AuditCheck is the result of verifying the hash chain.
type AuditCheck struct {
	// OK is true when every row's hash matches and links to its
	// predecessor.
	OK bool
	// Rows is the number of rows checked; Head the seq of the newest.
	Rows int64
	Head int64
	// BrokenAt is the seq of the first row that does not verify (0 when OK),
	// and Problem says what is wrong with it.
	BrokenAt int64
	Problem  string
}

// AuditTrail lists and verifies the audit trail. List pages newest first by
// keyset on seq: before = 0 starts at the newest row. Listing the trail
// should itself be audited (action audit.list) by the implementation.
type AuditTrail interface {
	List(ctx context.Context, f AuditFilter, before int64, limit int) (AuditPage, error)
	Verify(ctx context.Context) (AuditCheck, error)
}

// Services are everything the TUI calls. Archive and Requests are required;
// a nil Runner or Audit leaves those screens saying what is missing; a nil
// Policy only loses the limits shown as hints in the request form. When
// Archive also implements service.OldestLister the letter list offers the
// "oldest first" sort; when Requests implements service.OpenCounter the
// summary counts open requests with it; when Archive implements
// service.ArrivalMinuter the summary draws the last hour's arrivals per
// minute.
type Services struct {
	Archive  service.Archive
	Requests service.Requests
	// RequestReads reads requests without an audit row, for the requests
	// screen's refreshes after a visit's first read went through Requests
	// (one audit row per visit, as a --watch leaves one per watch); nil
	// reads through Requests every time.
	RequestReads service.RequestReads
	// LiveQueues reads the states of WorkQueue's queues from their
	// system's live view for the summary; nil leaves the summary saying
	// they are not read.
	LiveQueues service.LiveQueues
	WorkQueue  string
	// HoldsGap reads the holds past their deadline in the reservation
	// database (the policy's gap query) for the summary; nil leaves them
	// out.
	HoldsGap service.HoldsGap
	// Policy reads the governance policy, unaudited (service.Policy's Load).
	Policy func(ctx context.Context) (replay.Policy, error)
	Runner Runner
	Audit  AuditTrail
	// Actor is the label the services act as (--actor), empty for the
	// login itself; Identity is the login behind it. The header shows
	// both, so that two people's windows side by side never look alike.
	Actor    string
	Identity Identity
	// Now is the clock for ages and toasts (time.Now when nil).
	Now func() time.Time
	// Systems say how each queue system reads in the views, from the
	// drivers.
	Systems deadletter.Systems
}

// Identity is the database login the TUI is connected as and what its
// groups let it do: the identity four-eyes compares. A zero Identity is
// unknown, and the TUI then says only what any login may be told.
type Identity struct {
	// Login is the session's login.
	Login string
	// Roles are the roles of the deployment's groups the login is in:
	// operator, approver and so on.
	Roles []string
	// Advisory is set for a login above the rules (a superuser, the
	// schema's owner): governance is advisory for it.
	Advisory bool
}

// Known reports whether the login was read.
func (i Identity) Known() bool { return i.Login != "" }

// May reports whether the login holds role, or is above the rules.
func (i Identity) May(role string) bool { return i.Advisory || slices.Contains(i.Roles, role) }

// Standing names the login's roles for the header: "operator+approver",
// "advisory" above the rules, "no group" in none.
func (i Identity) Standing() string {
	switch {
	case i.Advisory:
		return "advisory"
	case len(i.Roles) == 0:
		return "no group"
	}
	return strings.Join(i.Roles, "+")
}
