package deadletter

import (
	"context"
	"time"
)

// letterStore is every operation the archive performs on its tables
// (dead_letters, and dead_letter_tallies that its triggers keep) and on the
// schema functions that write them (ingest_letters, purge_letters), one
// method per operation, in the manner of river's riverdriver.Executor.
// Capture, paging, decoding and auditing live in this package's other
// files and call it; postgresLetters (postgres.go) is its implementation
// and the only code of the package that holds SQL. It stays an interface
// with that one implementation and no fake, as the index of the package's
// SQL with each operation's contract in one place; the rules it reaches are
// the database's, so the package is tested against PostgreSQL, and callers
// fake service.Archive instead (held to it by internal/service/servicetest).
type letterStore interface {
	// LetterInsertBatch stores letters through ingest_letters in one
	// statement, which also writes the batch's audit row (actor beside the
	// login, target queue), and returns the ids of the letters it stored:
	// a letter whose fingerprint is already archived is skipped.
	LetterInsertBatch(ctx context.Context, actor, queue string, letters []Letter) ([]int64, error)

	// LetterSummary returns one line for each reason category that holds
	// letters, in no particular order.
	LetterSummary(ctx context.Context) ([]CategorySummary, error)

	// LetterList returns up to p.Limit letters matching p.Filter, in the
	// order p asks for, strictly after p.After when it is set.
	LetterList(ctx context.Context, p letterListParams) ([]Row, error)

	// LetterGet returns the letter with id as stored, its encoded columns
	// undecoded, or a *NotFoundError.
	LetterGet(ctx context.Context, id int64) (storedLetter, error)

	// LetterListByJob returns up to 100 letters of the job jobKey other
	// than exceptID, lowest id first.
	LetterListByJob(ctx context.Context, jobKey string, exceptID int64) ([]Row, error)

	// LetterPurgeCount fixes the cutoff of a retention window by the
	// database's clock and counts the unredacted letters dead-lettered
	// before it, and how many of those an open request holds.
	LetterPurgeCount(ctx context.Context, olderThan time.Duration) (PurgeResult, error)

	// LetterPurge redacts up to batch letters dead-lettered before cutoff,
	// of ids above after, through purge_letters, which writes the batch's
	// audit row and refuses a cutoff inside the policy's retention, and
	// returns the ids it redacted, in order.
	LetterPurge(ctx context.Context, actor string, cutoff time.Time, batch int, after int64) ([]int64, error)

	// LetterPurgeLeft counts the unredacted letters dead-lettered before
	// cutoff that no open request holds: what a purge has yet to redact.
	LetterPurgeLeft(ctx context.Context, cutoff time.Time) (int64, error)

	// LetterCount counts the letters matching f, stopping at limit.
	LetterCount(ctx context.Context, f Filter, limit int) (int, error)

	// LetterCountEligible counts the letters matching f that a request's
	// filter would take, as the schema's letters_matching selects them
	// (dead and not redacted), stopping at limit.
	LetterCountEligible(ctx context.Context, f Filter, limit int) (int, error)

	// LetterCountRedead counts the letters captured with an
	// x-replay-request header naming requestID.
	LetterCountRedead(ctx context.Context, requestID int64) (int, error)

	// LetterCountRedeadOf is LetterCountRedead for each of requests at
	// once; a request with none is not in the map.
	LetterCountRedeadOf(ctx context.Context, requests []int64) (map[int64]int, error)

	// LetterRedeadByRequest counts the letters captured with an
	// x-replay-request header, per request, within w's bounds, for the
	// maxRedeadRequests requests with the highest ids.
	LetterRedeadByRequest(ctx context.Context, w SignalsOptions) ([]RequestRedead, error)

	// LetterSnapshot runs fn on a letterStore whose reads all see one
	// snapshot, read only, with one clock (now() stays the snapshot's).
	LetterSnapshot(ctx context.Context, fn func(letterStore) error) error

	// LetterClock returns the database's now().
	LetterClock(ctx context.Context) (time.Time, error)

	// LetterSummaryBetween is LetterSummary for the letters dead-lettered
	// within w's bounds, read from the letters themselves.
	LetterSummaryBetween(ctx context.Context, w SignalsOptions) ([]CategorySummary, error)

	// LetterAttempts counts the letters per category, error class, waiting
	// or not, and attempts: from the tallies when w is unbounded, from the
	// letters within w's bounds otherwise.
	LetterAttempts(ctx context.Context, w SignalsOptions) ([]attemptTally, error)

	// LetterArrivals counts, per category, the letters dead-lettered in the
	// 5 minutes, hour and 24 hours before end.
	LetterArrivals(ctx context.Context, end time.Time) ([]arrivalTally, error)

	// LetterOverdue counts the waiting letters whose due_at is before
	// now() and finds the deadlines at the lateness percentiles: from the
	// due-hour tallies and an index when w is unbounded, from the letters
	// within w's bounds otherwise.
	LetterOverdue(ctx context.Context, w SignalsOptions) (overdueTally, error)

	// LetterArrivalMinutes counts, per category, the letters dead-lettered
	// in each whole minute of the hour before end, by minutes before end.
	LetterArrivalMinutes(ctx context.Context, end time.Time) ([]minuteTally, error)
}

// letterListParams says which page of letters LetterList returns.
type letterListParams struct {
	Filter Filter
	// After, when set, is the position the page continues from.
	After *Cursor
	// Limit is the number of rows to return at most.
	Limit int
	// OldestFirst orders by (dead_lettered_at, id) ascending rather than
	// descending.
	OldestFirst bool
}

// storedLetter is one letter as LetterGet reads it: the Detail fields that
// are plain columns, and the columns Show decodes itself.
type storedLetter struct {
	Detail
	history     []byte // attempt_history, JSON
	payloadHash []byte
	jobKey      *string
	properties  []byte // as EncodeProperties wrote them; nil before they were recorded
}
