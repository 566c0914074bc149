package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Problem classifies what a verifier found wrong with the chain.
type Problem string

// The problems a verifier reports. Each names the first seq at which the
// chain stops being what an untouched trail looks like.
const (
	// HashMismatch: the row's stored hash is not the hash of its fields. A
	// field was changed after the row was written, in a file, or in the
	// database by someone who first removed the hash's generation.
	HashMismatch Problem = "hash-mismatch"
	// BrokenLink: the row's prev_hash is not the hash of the row before it.
	// The row before was changed (in the database, a changed row's hash is
	// regenerated, so an edit shows here), or rows were swapped, reordered
	// or inserted.
	BrokenLink Problem = "broken-link"
	// Gap: seqs are missing. Rows were deleted (or, in a file, the export
	// was filtered).
	Gap Problem = "gap"
	// DuplicateSeq: two rows share a seq. One of them was forged.
	DuplicateSeq Problem = "duplicate-seq"
	// OutOfOrder: a file lists a row after one with a higher seq.
	OutOfOrder Problem = "out-of-order"
	// Malformed: a row cannot be read (a file that is not an expiryctl
	// export, a field that does not parse, a hash that is not 32 bytes).
	Malformed Problem = "malformed"
	// AnchorMissing: the trail has no row at the anchor's seq. Its tail (or,
	// in a file, the part holding the anchor) was removed.
	AnchorMissing Problem = "anchor-missing"
	// AnchorMismatch: the row at the anchor's seq has a different hash than
	// the anchor. The chain up to the anchor was rewritten.
	AnchorMismatch Problem = "anchor-mismatch"
	// CheckpointOrigin: the checkpoint is of another trail.
	CheckpointOrigin Problem = "checkpoint-origin"
	// CheckpointTruncated: the trail has fewer rows than a checkpoint
	// signed: its tail was removed.
	CheckpointTruncated Problem = "checkpoint-truncated"
	// CheckpointMismatch: the trail's first rows, as many as a checkpoint
	// signed, no longer hash to its root: rows before it were rewritten,
	// inserted or removed, even if every hash was recomputed.
	CheckpointMismatch Problem = "checkpoint-mismatch"
	// InclusionFailed: a row of an evidence export is not in the tree its
	// checkpoint signs: it was changed, or it is from another trail.
	InclusionFailed Problem = "inclusion-failed"
	// CheckpointSignature: a checkpoint is not signed by the verifier key:
	// it was forged, or signed by another key.
	CheckpointSignature Problem = "checkpoint-signature"
	// CheckpointRollback: an export carries a checkpoint older than the
	// one the reviewer holds: it was made from a trail rolled back, or
	// with the newer checkpoints withheld.
	CheckpointRollback Problem = "checkpoint-rollback"
	// Incomplete: a filtered evidence export holds fewer rows of its
	// filter than the checkpoint's count tree says the trail has, or its
	// proof of that count was taken out or does not check.
	Incomplete Problem = "incomplete"
	// ConsistencyUnproven: an export's checkpoint is newer than the
	// reviewer's, and the export carries no proof that it extends it.
	ConsistencyUnproven Problem = "consistency-unproven"
)

// ChainError reports a trail that is not intact: the first bad seq and what
// is wrong there. Commands map it to their own exit code, so scripts can
// tell "tampered" from "could not check".
type ChainError struct {
	// Seq is the first seq at which the chain is wrong.
	Seq     int64
	Problem Problem
	// Detail says what was found, in words and values.
	Detail string
	// Verified counts the rows checked and found intact before Seq.
	Verified int64
	// Source names what was verified: "database" or a file name.
	Source string
}

func (e *ChainError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("audit trail in %s does not verify (%s): %s", e.Source, e.Problem, e.Detail)
	}
	return fmt.Sprintf("audit trail in %s is not intact: first bad seq %d (%s): %s; %s before it verified",
		e.Source, e.Seq, e.Problem, e.Detail, plural(e.Verified, "row"))
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// Result is what a successful verification covered.
type Result struct {
	// Rows is how many rows had their hash and link checked.
	Rows int64
	// From is the first seq checked (0 when none was).
	From int64
	// Head is the last row checked: keep it as an anchor.
	Head Anchor
	// Gaps counts the places where seqs jump, which a file verified with
	// AllowGaps may have (a filtered export); always 0 otherwise.
	Gaps int64
}

// VerifyOptions say what a verification expects.
type VerifyOptions struct {
	// From is the first seq to check (0 or 1: the whole chain). Row From-1,
	// when present, provides the hash row From must link to.
	From int64
	// Anchor, when set, must be found: a row with its seq and hash.
	Anchor *Anchor
	// AllowGaps accepts jumps in seq (files only): a filtered export lists
	// some rows and not the ones between. Each row is then checked against
	// its own prev_hash, and links only between consecutive seqs, so a
	// filtered export proves much less than a whole one; see docs/audit.md.
	AllowGaps bool
}

// chain is the verification state shared by VerifyDB and VerifyFile: both
// feed it rows in the order they come and it reports the first row that
// breaks the chain. It checks, for each row: that its seq follows the last
// one; that its prev_hash is the last row's hash (zero before seq 1); that
// its hash is sha256 of its canonical encoding; and that the anchor, if one
// was given, is met.
type chain struct {
	opts   VerifyOptions
	source string
	file   bool // a file may be a filtered export; the database may not
	res    Result

	started  bool  // a row at or past From has been checked
	lastSeq  int64 // last row seen: checked, or the link row From-1
	lastHash Hash
	haveLast bool

	anchorSeen bool
	buf        []byte
}

func newChain(source string, opts VerifyOptions) *chain {
	if opts.From < 1 {
		opts.From = 1
	}
	return &chain{opts: opts, source: source}
}

func (c *chain) fail(seq int64, p Problem, format string, args ...any) *ChainError {
	return &ChainError{Seq: seq, Problem: p, Detail: fmt.Sprintf(format, args...), Verified: c.res.Rows, Source: c.source}
}

// checkAnchor notes that the row at the anchor's seq was seen and compares
// its hash.
func (c *chain) checkAnchor(seq int64, hash []byte) *ChainError {
	if c.opts.Anchor == nil || seq != c.opts.Anchor.Seq {
		return nil
	}
	c.anchorSeen = true
	if !bytes.Equal(hash, c.opts.Anchor.Hash[:]) {
		return c.fail(seq, AnchorMismatch, "the anchor says seq %d has hash %s, the trail has %x: the chain up to the anchor was rewritten",
			seq, c.opts.Anchor.Hash, hash)
	}
	return nil
}

// add checks one row. The fields are the row's values; prevHash and hash
// are its stored hashes, of any length, since a tampered row may hold
// anything.
func add[S ~string | ~[]byte](c *chain, seq, atMicros int64, actor, dbRole, action, target, details, outcome S, prevHash, hash []byte) *ChainError {
	switch {
	case seq < 1:
		return c.fail(seq, Malformed, "seq %d: the chain starts at 1", seq)
	case c.haveLast && seq == c.lastSeq:
		return c.fail(seq, DuplicateSeq, "a second row with seq %d: one of them was forged", seq)
	case c.haveLast && seq < c.lastSeq:
		return c.fail(seq, OutOfOrder, "seq %d comes after seq %d: rows were reordered", seq, c.lastSeq)
	case len(hash) != sha256.Size || len(prevHash) != sha256.Size:
		return c.fail(seq, Malformed, "stored hashes are %d and %d bytes, not 32", len(prevHash), len(hash))
	}
	if seq < c.opts.From {
		// Before the range: only the anchor, and row From-1 as the link.
		if seq == c.opts.From-1 {
			c.lastSeq, c.haveLast = seq, true
			copy(c.lastHash[:], hash)
		}
		return c.checkAnchor(seq, hash)
	}

	// The link: what prev_hash must be.
	var want *Hash
	switch {
	case seq == 1:
		want = &ZeroHash
	case c.haveLast && seq == c.lastSeq+1:
		want = &c.lastHash
	case !c.haveLast && seq == c.opts.From:
		// The first row of the range with no row before it: only a file
		// asked to start at From > 1 gets here (VerifyDB reports the missing
		// link row itself). Nothing to link to.
	case c.opts.AllowGaps:
		c.res.Gaps++
	default:
		why := "they were deleted"
		if c.file {
			why = "a filtered export, or deletion"
		}
		if c.haveLast {
			missingFrom := c.lastSeq + 1
			return c.fail(missingFrom, Gap, "%s missing between seq %d and seq %d (%s)", missingRows(missingFrom, seq-1), c.lastSeq, seq, why)
		}
		return c.fail(c.opts.From, Gap, "%s missing before seq %d (%s)", missingRows(c.opts.From, seq-1), seq, why)
	}
	if want != nil && !bytes.Equal(prevHash, want[:]) {
		return c.fail(seq, BrokenLink, "prev_hash %x is not the hash of seq %d (%s): seq %d was changed (the database re-hashes a changed row), or rows were swapped, reordered, inserted or removed",
			prevHash, seq-1, want, seq-1)
	}

	c.buf = appendCanonical(c.buf[:0], seq, atMicros, actor, dbRole, action, target, details, outcome, prevHash)
	sum := sha256.Sum256(c.buf)
	if cap(c.buf) > 1<<20 {
		c.buf = nil // one huge row must not pin its buffer for the rest of the run
	}
	if !bytes.Equal(sum[:], hash) {
		return c.fail(seq, HashMismatch, "stored hash %x, computed %x: a field of the row was changed after it was written", hash, sum)
	}
	if ce := c.checkAnchor(seq, hash); ce != nil {
		return ce
	}

	if !c.started {
		c.started = true
		c.res.From = seq
	}
	c.res.Rows++
	c.lastSeq, c.haveLast = seq, true
	copy(c.lastHash[:], hash)
	c.res.Head = Anchor{Seq: seq, Hash: c.lastHash}
	return nil
}

// finish checks what can only be checked at the end: the anchor was met.
func (c *chain) finish() *ChainError {
	if c.opts.Anchor != nil && !c.anchorSeen {
		end := "it has no rows"
		if c.haveLast {
			end = "it ends at seq " + strconv.FormatInt(c.lastSeq, 10)
		}
		return c.fail(c.opts.Anchor.Seq, AnchorMissing, "no row with the anchor's seq %d (%s): rows were removed from the tail, or the export does not cover the anchor",
			c.opts.Anchor.Seq, end)
	}
	return nil
}

func seqRange(from, to int64) string {
	if from == to {
		return strconv.FormatInt(from, 10)
	}
	return strconv.FormatInt(from, 10) + "–" + strconv.FormatInt(to, 10)
}

// missingRows says which rows are missing: "row 20 is", "rows 20–25 are".
func missingRows(from, to int64) string {
	if from == to {
		return "row " + strconv.FormatInt(from, 10) + " is"
	}
	return "rows " + seqRange(from, to) + " are"
}

// VerifyDB recomputes the chain from the database, oldest first, from seq
// `from` (0 or 1: the whole trail), and checks the anchor when one is given.
// It trusts nothing the database computed: every hash is recomputed in Go
// from the row's fields (AppendCanonical) and every link compared with the
// row before. Rows cut from the tail leave a shorter chain that is intact in
// itself: only an anchor shows them.
//
// It returns a *ChainError naming the first bad seq when the trail is not
// intact, and another error when it could not be read. Rows are streamed in
// one read-only REPEATABLE READ transaction, so rows appended while it runs
// neither disturb it nor are checked.
//
// VerifyDB does not write an audit row itself; `audit verify` records
// `audit.verify` with the result.
func VerifyDB(ctx context.Context, pool *pgxpool.Pool, from int64, anchor *Anchor) (Result, error) {
	return verifyDB(ctx, newPostgresTrail(pool), from, anchor, nil)
}

// verifyDB is VerifyDB over trail; when verified is given (from must then
// be 1), it is called with every row that verified, in order.
func verifyDB(ctx context.Context, trail trailStore, from int64, anchor *Anchor, verified func(*rawRow) error) (Result, error) {
	c := newChain("the database", VerifyOptions{From: from, Anchor: anchor})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		res  Result
		verr error
	)
	err := trail.Snapshot(ctx, func(snapshot trailStore) error {
		res, verr = c.verifySnapshot(ctx, cancel, snapshot, verified)
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("audit verify: %w", err)
	}
	return res, verr
}

// verifySnapshot is verifyDB inside its snapshot of the trail; after a
// finding it cancels ctx through cancel before it returns.
func (c *chain) verifySnapshot(ctx context.Context, cancel context.CancelFunc, trail trailStore, verified func(*rawRow) error) (Result, error) {
	from, anchor := c.opts.From, c.opts.Anchor
	last, err := trail.AuditLastSeq(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("audit verify: read the end of the trail: %w", err)
	}
	if from > last+1 {
		return Result{}, fmt.Errorf("audit verify: --from %d is past the end of the trail (its last row is seq %d)", from, last)
	}

	// An anchor before the range is looked up on its own rather than
	// streaming everything up to it.
	if anchor != nil && anchor.Seq < from-1 {
		hash, found, err := trail.AuditHashAt(ctx, anchor.Seq)
		switch {
		case err != nil:
			return Result{}, fmt.Errorf("audit verify: read the anchor row: %w", err)
		case found:
			if ce := c.checkAnchor(anchor.Seq, hash); ce != nil {
				return c.res, ce
			}
		}
		// A missing anchor row is reported by finish.
	}

	// From the start, every row is read, so that a forged row with a seq
	// below 1 is seen too; from further on, the reading starts at the link
	// row From-1.
	var r rowRange
	if from > 1 {
		r.FromSeq = from - 1
	}
	var chainErr *ChainError
	err = trail.AuditRange(ctx, r, func(r *rawRow) error {
		if from > 1 && !c.haveLast && r.seq >= from {
			// Row From-1 is not there: the link of row From cannot be
			// checked, and its absence is itself a finding.
			chainErr = c.fail(from-1, Gap, "row %d, which seq %d links to, is missing: rows were deleted", from-1, from)
			return chainErr
		}
		if ce := add(c, r.seq, r.atMicros, r.actor, r.dbRole, r.action, r.target, r.details, r.outcome, r.prevHash, r.hash); ce != nil {
			chainErr = ce
			return ce
		}
		if verified != nil {
			return verified(r)
		}
		return nil
	})
	if chainErr != nil {
		cancel()
		return c.res, chainErr
	}
	if err != nil {
		return c.res, fmt.Errorf("audit verify: %w", err)
	}

	if ce := c.finish(); ce != nil {
		return c.res, ce
	}
	return c.res, nil
}
