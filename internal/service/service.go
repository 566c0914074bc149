package service

import (
	"context"
	"io"
	"time"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/reconcile"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// Archive is the read side of the dead-letter archive. *deadletter.Archive
// implements it; every call leaves an audit row unless the archive was made
// WithoutListingAudit (the terminal UI's, whose lists refresh on a timer).
// List pages newest first by keyset; Stream emits every match, newest
// first, with bounded memory; Show is audited always, since it reveals a
// payload. A missing letter is a *deadletter.NotFoundError. Signals reads
// the incident signals of `dlq summary` (arrival rates and trends, overdue
// holds, counts by category and error class with their attempts) in one
// snapshot, recorded as dlq.summary like Summary.
type Archive interface {
	Summary(ctx context.Context) ([]deadletter.CategorySummary, error)
	Signals(ctx context.Context, opts deadletter.SignalsOptions) (deadletter.Signals, error)
	List(ctx context.Context, f deadletter.Filter, after *deadletter.Cursor, limit int) (deadletter.Page, error)
	Stream(ctx context.Context, f deadletter.Filter, after *deadletter.Cursor, emit func(deadletter.Row) error) error
	Show(ctx context.Context, id int64) (deadletter.Detail, error)
}

// OldestLister is implemented by an archive that can also list oldest first.
// ListOldest returns up to limit letters matching f in ascending
// (dead_lettered_at, id) order, continuing with letters strictly newer than
// after; Page.Next is the last row's cursor when more follow. The terminal
// UI offers its "oldest first" sort only when its Archive implements it.
type OldestLister interface {
	ListOldest(ctx context.Context, f deadletter.Filter, after *deadletter.Cursor, limit int) (deadletter.Page, error)
}

// ArrivalMinuter is implemented by an archive that can count the last
// hour's arrivals per category and minute, by the database's clock, reading
// only that hour (an index range). The terminal UI draws its arrival
// sparklines when its Archive implements it. *deadletter.Archive does.
type ArrivalMinuter interface {
	ArrivalMinutes(ctx context.Context) (deadletter.MinuteArrivals, error)
}

// Requests is the request side of replay: create, show, list, review and
// cancel replay and discard requests. *replay.Service implements it;
// governance refusals (four-eyes, policy, expiry, a changed cohort) come
// back as *replay.Refusal, a missing request as *replay.NotFoundError.
type Requests interface {
	Create(ctx context.Context, nr replay.NewRequest) (replay.Created, error)
	Show(ctx context.Context, id int64, sample int) (replay.Detail, error)
	List(ctx context.Context, status replay.Status, limit int) ([]replay.Request, error)
	Approve(ctx context.Context, id int64, opts replay.ReviewOptions) (replay.Request, error)
	Reject(ctx context.Context, id int64, opts replay.ReviewOptions) (replay.Request, error)
	Cancel(ctx context.Context, id int64, why string) (replay.Request, error)
}

// OpenCounter is implemented by a Requests service that can count open
// requests by status cheaply and without writing; the terminal UI's live
// summary uses it when present instead of listing requests.
type OpenCounter interface {
	CountOpen(ctx context.Context) (map[replay.Status]int, error)
}

// RunnerGoneCounter is implemented by a Requests service that can count,
// as cheaply and without writing, the running requests no runner holds;
// the terminal UI's summary says how many of its running requests those
// are, since nothing publishes them until someone resumes them.
type RunnerGoneCounter interface {
	CountRunnersGone(ctx context.Context) (int, error)
}

// Runner runs approved requests with replay's runner. Run blocks until the
// run completes, halts on a stop condition (a *replay.HaltError, with the
// result filled in), is cancelled or fails; a refusal before it started
// returns a result with no Status. progress, when not nil, is called from
// the run's goroutine a few times a second. DryRun says what a run would
// do with each item of any open request and changes nothing. A discard
// publishes nothing, so only a replay connects to the queue system.
type Runner interface {
	Run(ctx context.Context, id int64, progress func(replay.Progress)) (replay.RunResult, error)
	DryRun(ctx context.Context, id int64) (replay.DryRunResult, error)
}

// Policy reads and changes the governance policy kept in the database.
// Load reads it without an audit row (for limits shown as hints, or
// purge's default window); Show reads it with the pending changes and
// records policy.show. Set proposes a change (applied at once only for the
// schema owner) and Review approves or rejects one; both are under
// four-eyes, refused as *replay.Refusal.
type Policy interface {
	Load(ctx context.Context) (replay.Policy, error)
	Show(ctx context.Context) (replay.Policy, []replay.PolicyChange, error)
	Set(ctx context.Context, changes map[string]any, why string) (replay.PolicySetResult, error)
	Review(ctx context.Context, id int64, approve bool, why string) (replay.Policy, error)
}

// Retention redacts payloads and headers past the retention window
// (`dlq purge`). Preview counts what Purge would redact and changes
// nothing; Purge redacts, or with DryRun counts, audited as the service's
// actor (opts.Actor is ignored).
type Retention interface {
	Preview(ctx context.Context, olderThan time.Duration) (deadletter.PurgeResult, error)
	Purge(ctx context.Context, opts deadletter.PurgeOptions) (deadletter.PurgeResult, error)
}

// Ingester captures a dead-letter queue into the archive (`dlq ingest`),
// acknowledging letters only after they are committed. It records as the
// service's actor (opts.Actor is ignored).
type Ingester interface {
	Ingest(ctx context.Context, src deadletter.Source, opts deadletter.IngestOptions) (deadletter.IngestStats, error)
}

// DLQSource is a consumer on one dead-letter queue, for an Ingester, that
// its user closes; closing returns what was not acknowledged to the queue.
// *broker.DLQSource and *sqsqueue.DLQSource implement it.
type DLQSource interface {
	deadletter.Source
	Close() error
	// QueueName is how letters and the audit trail name the queue, as
	// its driver names it.
	QueueName() string
}

// Recorder writes one row to the audit trail as the service's actor (the
// entry's Actor is ignored), for commands whose action is not itself a
// service call, such as opening the terminal UI.
type Recorder interface {
	Record(ctx context.Context, e audit.Entry) error
}

// AuditReviewer reads and verifies the trail, leaving an audit row for each
// read and each verification. *audit.Reviewer implements it. A broken
// chain is a *audit.ChainError; a verification that could not record its
// own row is a *audit.RecordError.
type AuditReviewer interface {
	List(ctx context.Context, f audit.Filter, after *audit.Cursor, limit int) (audit.Page, error)
	Verify(ctx context.Context, from int64, anchor *audit.Anchor) (audit.Result, error)
	VerifyCheckpoint(ctx context.Context, cp audit.Checkpoint) (audit.Result, audit.Consistency, error)
	// Consistency checks that newer extends older with the proof the
	// database's stored tree gives.
	Consistency(ctx context.Context, older, newer audit.Checkpoint) error
}

// AuditExporter writes the trail out (`audit export`). Append records an
// entry and returns its anchor, so that an export can end with the row
// that records it; Record records one without waiting to learn it.
// DefaultFormat is the format a filter gets when none was chosen (evidence
// for a filtered export once a checkpoint exists). Entries are recorded as
// the service's actor.
type AuditExporter interface {
	Recorder
	Append(ctx context.Context, e audit.Entry) (audit.Anchor, error)
	DefaultFormat(ctx context.Context, f audit.Filter) (audit.Format, error)
	Export(ctx context.Context, w io.Writer, format audit.Format, f audit.Filter) (audit.ExportResult, error)
	// ExportEvidence writes evidence, with proofs that its checkpoint
	// extends those of the sizes in from, checkpoints a reviewer holds.
	ExportEvidence(ctx context.Context, w io.Writer, f audit.Filter, from ...int64) (audit.EvidenceResult, error)
}

// AuditSigner signs checkpoints of the trail's tree head with a key from
// `audit keygen`, as the service's actor. Sign signs one now; SignEvery
// signs one every interval until ctx is done, reporting each (or why it
// failed) and going on after a failure.
type AuditSigner interface {
	Sign(ctx context.Context, signerKey string) (audit.Checkpoint, error)
	SignEvery(ctx context.Context, signerKey string, interval time.Duration, report func(audit.Checkpoint, error))
}

// Reconciler compares the governance tables with the trail's events
// (`audit verify --reconcile`) and records that it did. States with no
// event behind them are a *reconcile.MismatchError.
type Reconciler interface {
	Reconcile(ctx context.Context) (reconcile.Report, error)
}

// Access changes and lists the membership of expiryctl's groups.
// *access.Service implements it; only the schema owner may grant or revoke.
type Access interface {
	Grant(ctx context.Context, login string, groups []string) error
	Revoke(ctx context.Context, login string, groups []string) error
	List(ctx context.Context) ([]access.Member, error)
}

// Migrator creates, upgrades or downgrades the schema. Migrate applies the
// numbered migrations and the definition files the database lacks, for
// deployment d ("": the one the schema serves; see
// store.MigrateDeployment), and records schema.migrate. PlanDown lists what Downgrade(version) would
// undo, newest first, changing nothing; Downgrade records
// schema.migrate.down with that list, then runs the Down sections.
type Migrator interface {
	Migrate(ctx context.Context, d store.Deployment) (store.MigrationResult, error)
	PlanDown(ctx context.Context, version int64) ([]store.Migration, error)
	Downgrade(ctx context.Context, version int64) (store.DowngradeResult, error)
}
