package replay

import (
	"context"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// tables is everything replay asks of PostgreSQL: one method per operation
// on the tables it owns (replay_requests, replay_items, policy,
// policy_changes) and per call of the schema's replay and policy functions,
// which make every governed write. Its one implementation is postgresTables
// (postgres*.go), the only code in this package with SQL in it; it is bound
// to a store.Querier, so the same methods serve the pool, a transaction or
// the runner's lock session (see onPostgres and inTx).
//
// It stays an interface with one implementation and no fake, on purpose:
// it is the index of every SQL operation of the package, each with its
// contract, in one file, while the implementation is spread by table over
// postgres*.go; and the runner's code calls it without seeing pgx. Faking
// it would fake the rules that matter, which are the database's: callers
// fake the services above it (held to them by internal/service/servicetest)
// and this package's tests run against PostgreSQL.
//
// Methods return the errors the rest of the package acts on: a refusal of
// the database as a *Refusal, a request that does not exist as a
// *NotFoundError. A run function that found the request no longer running
// returns the status it found instead (stopped), having written nothing.
type tables interface {
	// RequestGet reads one request.
	RequestGet(ctx context.Context, id int64) (Request, error)
	// RequestList reads requests newest first, of one status unless status
	// is "", at most limit of them.
	RequestList(ctx context.Context, status Status, limit int) ([]Request, error)
	// RequestCountOpen counts the open requests by status.
	RequestCountOpen(ctx context.Context) (map[Status]int, error)
	// RequestCountRunnersGone counts the running requests whose runner
	// lease no live session holds.
	RequestCountRunnersGone(ctx context.Context) (int, error)
	// RequestTally counts the items of the open requests by request status
	// and item state, their confirmed ones in Published, and returns the
	// confirmed items of each ended request not in counted, by request, all
	// in one snapshot (see Tallier).
	RequestTally(ctx context.Context, counted []int64) (t Tally, ended map[int64]int64, err error)
	// RequestStatus reads a request's status and halt reason.
	RequestStatus(ctx context.Context, id int64) (status Status, haltReason string, err error)
	// RequestCreate freezes a new request (replay_request_create) and
	// returns its id and how many letters the selection matched.
	RequestCreate(ctx context.Context, actor string, nr NewRequest, selection []byte) (id int64, matched int, err error)
	// RequestReview approves or rejects a request (replay_review);
	// decision is "approve" or "reject", shown the cohort hash shown.
	RequestReview(ctx context.Context, actor string, id int64, decision, why string, allowFreshKey bool, shown []byte, signed []byte) error
	// SessionIdentity is the session's login and the database's name, as
	// a signed approval names them.
	SessionIdentity(ctx context.Context) (login, database string, err error)
	// RequestCancel cancels a request (replay_cancel).
	RequestCancel(ctx context.Context, actor string, id int64, why string) error
	// RequestExpireStale marks requests whose review or approval window has
	// passed expired (replay_expire_stale), so their letters are free again,
	// each with its audit row. The database decides what is stale.
	RequestExpireStale(ctx context.Context, actor string) error
	// RequestLedger reads every request, oldest first, with its items'
	// counts per state and no outcomes yet.
	RequestLedger(ctx context.Context) ([]LedgerEntry, error)

	// ItemsLoad reads the items of a request whose ordinals lie in
	// [lo, hi], with their letters, in ordinal order, in the given states
	// (all when none are given).
	ItemsLoad(ctx context.Context, request int64, lo, hi int, states []string) ([]*runItem, error)
	// ItemsMaxOrdinal is the last ordinal of a request's items, -1 when it
	// has none.
	ItemsMaxOrdinal(ctx context.Context, request int64) (int, error)
	// ItemsCount counts a request's items.
	ItemsCount(ctx context.Context, request int64) (int, error)
	// ItemsCountByState counts a request's items per state.
	ItemsCountByState(ctx context.Context, request int64) (map[string]int, error)
	// ItemsCountByCategoryAndState counts a request's items per reason
	// category of their letters and per state.
	ItemsCountByCategoryAndState(ctx context.Context, request int64) (map[deadletter.Category]int, map[string]int, error)
	// ItemsNotConfirmed reads the outcome of every item of a request that
	// was not confirmed, in ordinal order.
	ItemsNotConfirmed(ctx context.Context, request int64) ([]ItemOutcome, error)
	// ItemsSample reads the first limit items of a request (all when limit
	// is 0), in ordinal order, with where each would be published.
	ItemsSample(ctx context.Context, req Request, limit int) ([]Item, error)
	// RetriesInPlace says whether a replay of system's letters retries
	// the jobs where they are, as the archive describes the system
	// (replay_retries_in_place): never as a letter says.
	RetriesInPlace(ctx context.Context, system deadletter.System) (bool, error)
	// ItemsPlanInputs reads the most attempts a letter of the request's
	// cohort went through and the distinct queues its replay fills (as
	// runItem.depthQueue names them), for Service.Plan.
	ItemsPlanInputs(ctx context.Context, req Request) (maxAttempts int, queues []string, err error)
	// ItemsPermanent reads the first limit letters of a request whose
	// category is one of deadletter.PermanentCategories, in ordinal order.
	ItemsPermanent(ctx context.Context, request int64, limit int) ([]PermanentLetter, error)
	// RunWatchedQueues lists the dead-letter queues a run of request owes
	// a watch, the queues its jobs die again into: those of its open items
	// and of the items it confirmed whose watch window is still open
	// (replay_watched_queues).
	RunWatchedQueues(ctx context.Context, request int64) ([]string, error)
	// ItemsTiming says when the items of a request may go, by the
	// database's clock.
	ItemsTiming(ctx context.Context, request int64) (Timing, error)
	// ItemsPropertyNotes counts the letters of a request whose properties a
	// replay cannot send as received.
	ItemsPropertyNotes(ctx context.Context, request int64) (PropertyNotes, error)
	// ItemsCohortChanges lists the letters of a request that changed since
	// it was frozen (replay_cohort_changes).
	ItemsCohortChanges(ctx context.Context, request int64) ([]CohortChange, error)
	// ItemsDecided calls each for every item decided confirmed, skipped or
	// failed, of every request.
	ItemsDecided(ctx context.Context, each func(request, letter int64, state string)) error
	// ItemsMark commits a window's decisions (replay_items_mark).
	ItemsMark(ctx context.Context, request int64, m itemMarks) (stopped Status, err error)
	// ItemsSend clears items of the ordinal range [lo, hi], each marked
	// publishing, for one publish more (replay_items_send), counting it in
	// the item's sends before the publish: what bounds an item's copies to
	// PublishBound. An item cleared that often already is refused by rule
	// publish-bound, and nothing is counted.
	// delayed says the messages carry the rest of their items' wait as a
	// delivery delay (Delayer), so that an item may be cleared up to the
	// queue's longest delay before its time, where the database knows the
	// queue delays single messages.
	ItemsSend(ctx context.Context, request int64, lo, hi int, items []int64, delayed bool) (stopped Status, err error)
	// ItemsRecord writes the broker's answers for items of the ordinal
	// range [lo, hi] (replay_items_record): confirmed, or failed with why.
	ItemsRecord(ctx context.Context, request int64, lo, hi int, confirmed, failed []int64, failedWhy []string) error

	// RunLockTry takes the request's runner lease for the session
	// (replay_run_acquire), naming it application, without waiting on its
	// holder; false when another standing session holds it.
	RunLockTry(ctx context.Context, request int64, application string) (bool, error)
	// RunLockHolders reads which standing sessions hold the runner leases
	// of the requests, by request; a request whose lease no standing
	// session holds is not in the map.
	RunLockHolders(ctx context.Context, requests []int64) (map[int64]lockHolder, error)
	// RunLockRelease gives the request's runner lease back
	// (replay_run_release).
	RunLockRelease(ctx context.Context, request int64) error
	// RunStart spends the approval or takes over a running request
	// (replay_run_start), handing over the consumers seen (nil: none read)
	// and how the run watches its cohort's dead-letter queues (JSON, see
	// dlqWatch.observation; nil for a discard).
	RunStart(ctx context.Context, actor string, request int64, seen *Observation, watched []byte) (resumed bool, label string, err error)
	// RunDiscardWindow decides the open items of a running discard in the
	// ordinal range [lo, hi] (replay_discard_window).
	RunDiscardWindow(ctx context.Context, request int64, lo, hi int) (decided int, stopped Status, err error)
	// RunInterrupted records a run that stops leaving the request running
	// (replay_run_interrupted); unsent go back to pending.
	RunInterrupted(ctx context.Context, actor string, request int64, unsent []int64, details map[string]any) error
	// RunHalt halts a running request (replay_run_halt).
	RunHalt(ctx context.Context, actor string, request int64, reason string, unsent []int64, details map[string]any) (stopped Status, err error)
	// RunComplete completes a running request (replay_run_complete).
	RunComplete(ctx context.Context, actor string, request int64, details map[string]any) (stopped Status, err error)
	// RequestFates says what became of the confirmed items of each of
	// requests (see Fates); a request with none confirmed is not in the
	// map.
	RequestFates(ctx context.Context, requests []int64) (map[int64]Fates, error)
	// RunAckedAfterCancel records items acked after the request was
	// cancelled under its runner (replay_run_acked_after_cancel).
	RunAckedAfterCancel(ctx context.Context, actor string, request int64, acked []int64) error
	// RunRedeadLettered counts the request's letters captured again.
	RunRedeadLettered(ctx context.Context, request int64) (int, error)
	// RunWatchOwed reads what a run of request owes its watch as it starts
	// or resumes (replay_run_watch_owed).
	RunWatchOwed(ctx context.Context, request int64) (WatchOwed, error)

	// OutcomesRecord writes decided outcomes of items the run confirmed
	// (replay_outcomes_record).
	OutcomesRecord(ctx context.Context, request int64, rows []outcomeRow) error
	// OutcomesSummary counts a request's recorded outcomes; nil when it has
	// none.
	OutcomesSummary(ctx context.Context, request int64) (*OutcomeStats, error)

	// CanaryRecord records the canary's start or pass
	// (replay_canary_record).
	CanaryRecord(ctx context.Context, actor string, request int64, passed bool, details map[string]any) error
	// CanaryPassed reports whether the canary of the request's approval
	// number approval passed.
	CanaryPassed(ctx context.Context, request int64, approval int) (bool, error)
	// CanaryStarted is how long ago the canary of the request's approval
	// number approval was published; nil when it was not.
	CanaryStarted(ctx context.Context, request int64, approval int) (*time.Duration, error)

	// EligibilityLimit bounds each eligibility query of the transaction
	// by eligibilityTimeout.
	EligibilityLimit(ctx context.Context) error
	// EligibilityRow runs a query built by eligibilitySQL for one item and
	// returns the values of its first row; found is false when it returned
	// none.
	EligibilityRow(ctx context.Context, sql string, it *runItem) (values []any, found bool, err error)
	// GapRow runs the policy's gap query, bounded by GapTimeout, and reads
	// its row, with the database's clock.
	GapRow(ctx context.Context, sql string) (past int64, oldest *time.Time, at time.Time, found bool, err error)

	// PolicyGet reads the policy.
	PolicyGet(ctx context.Context) (Policy, error)
	// PolicyDocument reads the policy row as jsonb renders it.
	PolicyDocument(ctx context.Context) (map[string]any, error)
	// PolicyDefaults builds the policy row a fresh schema has, in a
	// temporary table dropped at commit: call it in a transaction that is
	// rolled back.
	PolicyDefaults(ctx context.Context) (map[string]any, error)
	// PolicySet proposes or applies a change (policy_set); changeID is set
	// for a proposal.
	PolicySet(ctx context.Context, actor string, changes map[string]any, why string) (changeID *int64, applied bool, err error)
	// PolicyReview approves or rejects a proposal (policy_review).
	PolicyReview(ctx context.Context, actor string, id int64, decision, why string) error
	// PolicyChangesPending reads the proposals waiting for review, oldest
	// first.
	PolicyChangesPending(ctx context.Context) ([]PolicyChange, error)
}

// itemMarks is one window's decisions for ItemsMark: the ordinal range it
// covers, the items to mark publishing, and the items skipped and failed
// with why.
type itemMarks struct {
	lo, hi           int
	publish          []int64
	skip, fail       []int64
	skipWhy, failWhy []string
}
