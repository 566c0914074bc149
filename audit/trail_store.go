package audit

import (
	"context"
	"time"
)

// trailStore is every operation this package performs on the trail's
// tables (audit_log, audit_trail, audit_tree, audit_checkpoints) and on the
// schema functions that write them (audit_append, audit_tree_extend,
// audit_checkpoint_record), one method per operation, in the manner of
// river's riverdriver.Executor. Hashing, verifying, proving and exporting
// live in this package's other files and call it; postgresTrail
// (postgres.go, postgres_stream.go) is its implementation and the only code
// of the package that holds SQL. It stays an interface with that one
// implementation and no fake, as the index of the package's SQL with each
// operation's contract in one place; the rules it reaches (numbering,
// chaining, the tree) are the database's, so the package is tested against
// PostgreSQL, and callers fake the services above it instead.
//
// A method whose rows can number millions takes a callback and calls it
// once per row as the row arrives, so that nothing is buffered; when the
// callback returns an error the method stops and returns it.
type trailStore interface {
	// AuditAppend writes one row through audit_append, which numbers it,
	// stamps it and chains it, and returns the row's seq and hash (in
	// hex). A refused row is a *store.Refusal.
	AuditAppend(ctx context.Context, actor, action, target string, details []byte, outcome Outcome) (seq int64, hash string, err error)

	// AuditList returns up to p.Limit rows matching p.Filter, highest seq
	// first, below p.After when it is set.
	AuditList(ctx context.Context, p auditListParams) ([]Row, error)

	// AuditRange calls fn for every row r selects, lowest seq first, as
	// the rows arrive. Over a transaction it reads in that transaction.
	AuditRange(ctx context.Context, r rowRange, fn func(*rawRow) error) error

	// AuditSeqs returns the seq of every row f matches, lowest first.
	AuditSeqs(ctx context.Context, f Filter) ([]int64, error)

	// AuditLastSeq returns the highest seq of the trail, 0 when it is
	// empty.
	AuditLastSeq(ctx context.Context) (int64, error)

	// AuditHashAt returns the stored hash of the row with seq; found is
	// false when there is none.
	AuditHashAt(ctx context.Context, seq int64) (hash []byte, found bool, err error)

	// AuditHashes calls fn with the seq and stored hash of up to limit
	// rows after afterSeq, lowest seq first.
	AuditHashes(ctx context.Context, afterSeq int64, limit int, fn func(seq int64, hash []byte) error) error

	// AuditCounts calls fn once for each value of each of CountFields
	// among the rows with seq ≤ size, with how many of those rows hold it
	// and the newest seq among them, in no particular order.
	AuditCounts(ctx context.Context, size int64, fn func(CountLeaf) error) error

	// AuditEvents returns the rows with outcome "ok" of the given actions,
	// lowest seq first.
	AuditEvents(ctx context.Context, actions []string) ([]Event, error)
	// AuditEventCounts counts the rows with outcome "ok" of action by the
	// text of details' key.
	AuditEventCounts(ctx context.Context, action, detailKey string) (map[string]int64, error)

	// AuditCanaryPassed reports whether the trail holds an "ok"
	// replay.canary.pass row for target's approval number approval.
	AuditCanaryPassed(ctx context.Context, target string, approval int) (bool, error)

	// AuditCanaryStarted returns how long ago, by the database's clock, the
	// newest "ok" replay.canary.start row for target's approval was
	// written, or nil when there is none.
	AuditCanaryStarted(ctx context.Context, target string, approval int) (*time.Duration, error)

	// TrailGet returns the trail's origin ("" when unnamed) and the number
	// of its rows the stored tree holds.
	TrailGet(ctx context.Context) (origin string, treeSize int64, err error)

	// TreeHashes calls fn with each of the stored tree hashes at indexes
	// that exist, in no particular order.
	TreeHashes(ctx context.Context, indexes []int64, fn func(index int64, hash []byte) error) error

	// TreeHashesBelow calls fn with every stored tree hash whose index is
	// below count, lowest index first.
	TreeHashesBelow(ctx context.Context, count int64, fn func(index int64, hash []byte) error) error

	// TreeExtend adds up to batch records after oldSize to the tree
	// through audit_tree_extend, which computes their hashes from the
	// trail's rows and refuses (rule tree-moved) when the tree no longer
	// has oldSize records; it returns the tree's size after.
	TreeExtend(ctx context.Context, oldSize int64, batch int) (int64, error)

	// CheckpointLatest returns the newest stored checkpoint note, nil when
	// there is none.
	CheckpointLatest(ctx context.Context) ([]byte, error)

	// CountsSize returns how many of the trail's first rows the stored
	// count tree counts.
	CountsSize(ctx context.Context) (int64, error)

	// CountLeaves calls fn with every stored leaf of the count tree in
	// buckets, in no particular order.
	CountLeaves(ctx context.Context, buckets []int, fn func(bucket int, l CountLeaf) error) error

	// CountNodes calls fn with the stored hash of each of nodes that is
	// stored (a node under which no leaf falls is not), in no particular
	// order.
	CountNodes(ctx context.Context, nodes []countNode, fn func(countNode, []byte) error) error

	// CountsExtend brings the stored count tree to the first newSize rows
	// through audit_counts_extend, which counts them itself, and returns
	// its root; a tree that counts more rows already is refused (rule
	// counts-moved).
	CountsExtend(ctx context.Context, newSize int64) ([]byte, error)

	// CheckpointNotes returns up to limit stored checkpoint notes, the
	// newest first.
	CheckpointNotes(ctx context.Context, limit int) ([][]byte, error)

	// CheckpointCover reads the trail's last seq and the newest stored
	// checkpoint's size and time.
	CheckpointCover(ctx context.Context) (CoverStatus, error)

	// CheckpointSizesBelow returns the distinct tree sizes of stored
	// checkpoints smaller than size, the largest first, at most limit.
	CheckpointSizesBelow(ctx context.Context, size int64, limit int) ([]int64, error)

	// CheckpointRecord stores a signed checkpoint of head through
	// audit_checkpoint_record, which writes its audit row as actor.
	CheckpointRecord(ctx context.Context, actor string, head TreeHead, note []byte) error

	// InTx runs fn with a trailStore in a new transaction (a subtransaction
	// over a transaction), committed when fn returns nil and rolled back
	// otherwise.
	InTx(ctx context.Context, fn func(trailStore) error) error

	// Snapshot runs fn with a trailStore in a new read-only REPEATABLE READ
	// transaction, which is rolled back afterwards: every read in fn sees
	// the trail as it was when the first one began. Only an error beginning
	// the transaction, or fn's own, is returned.
	Snapshot(ctx context.Context, fn func(trailStore) error) error
}

// auditListParams says which page of rows AuditList returns.
type auditListParams struct {
	Filter Filter
	// After, when set, is the position the page continues from.
	After *Cursor
	// Limit is the number of rows to return at most.
	Limit int
}

// rowRange says which rows AuditRange streams.
type rowRange struct {
	Filter Filter
	// FromSeq, when positive, starts at the row with that seq.
	FromSeq int64
	// Last, when set, ends at the row with that seq, whatever Filter says.
	Last *int64
}

// rawRow is one audit row as AuditRange hands it over. Its slices point
// into the connection's read buffer and are valid only until the next row
// is read: the export and verify loops use a row and drop it, which is what
// keeps their memory flat however long the trail is.
type rawRow struct {
	seq      int64
	atMicros int64 // since the Unix epoch
	actor    []byte
	dbRole   []byte
	action   []byte
	target   []byte
	details  []byte // details::text
	outcome  []byte
	prevHash []byte
	hash     []byte
}
