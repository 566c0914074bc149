package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"
)

// Consistency is what a verification against a checkpoint proved: the
// trail of Size rows, whose tree has root Root, extends the checkpoint's.
type Consistency struct {
	Checkpoint Checkpoint
	Size       int64
	Root       tlog.Hash
}

// VerifyAgainstCheckpoint checks the whole chain, as VerifyDB does, and
// then that the trail extends the signed checkpoint cp: the tree of its
// rows, computed here from the rows and nothing the database stored, holds
// the checkpointed tree (a tlog consistency proof from cp's head to
// today's). A trail cut below the checkpoint's size, or whose rows before it
// were rewritten, inserted or removed, even with every hash recomputed,
// fails with a *ChainError; where the tree the database stored still holds
// the original rows, it names the first row that differs.
func VerifyAgainstCheckpoint(ctx context.Context, pool *pgxpool.Pool, cp Checkpoint) (Result, Consistency, error) {
	trail := newPostgresTrail(pool)
	origin, _, err := trail.TrailGet(ctx)
	if err != nil {
		return Result{}, Consistency{}, fmt.Errorf("audit verify: read the trail's origin: %w", err)
	}
	if cp.Origin != origin {
		return Result{}, Consistency{}, &ChainError{Problem: CheckpointOrigin, Source: "the database",
			Detail: fmt.Sprintf("the checkpoint is of %q, this database holds %q", cp.Origin, origin)}
	}
	tree := &memoryTree{}
	var tally *tallyOnTheSide
	if !cp.Counts.IsZero() {
		tally = newTallyOnTheSide(cp.Size)
		defer tally.finish()
	}
	res, err := verifyDB(ctx, trail, 1, nil, func(r *rawRow) error {
		if tally != nil && r.seq <= cp.Size {
			sideAdd(tally, r.seq, r.action, r.actor, r.target)
		}
		return tree.add(r.seq-1, r.hash)
	})
	if err != nil {
		return res, Consistency{}, err
	}
	size := res.Head.Seq
	fail := func(seq int64, p Problem, format string, args ...any) *ChainError {
		return &ChainError{Seq: seq, Problem: p, Detail: fmt.Sprintf(format, args...), Verified: min(res.Rows, max(seq-1, 0)), Source: "the database"}
	}
	if size < cp.Size {
		return res, Consistency{}, fail(size+1, CheckpointTruncated,
			"the checkpoint signed by %s covers %d rows, the trail has %d: %s missing, removed from the tail",
			cp.SignedBy(), cp.Size, size, missingRows(size+1, cp.Size))
	}
	root, err := tlog.TreeHash(cp.Size, tree)
	if err != nil {
		return res, Consistency{}, fmt.Errorf("audit verify: %w", err)
	}
	if root != cp.Root {
		seq, where := firstStoredDifference(ctx, trail, tree, cp.Size)
		return res, Consistency{}, fail(seq, CheckpointMismatch,
			"the first %d rows hash to %s, the checkpoint signed by %s says %s: rows up to seq %d were rewritten, inserted or removed; %s",
			cp.Size, root, cp.SignedBy(), cp.Root, cp.Size, where)
	}
	if tally != nil {
		counted, err := countTreeOf(tally.finish()).root()
		if err != nil {
			return res, Consistency{}, fmt.Errorf("audit verify: %w", err)
		}
		if counted != cp.Counts {
			return res, Consistency{}, fail(cp.Size, CheckpointMismatch,
				"the first %d rows, counted by action, actor and target, give a count tree with root %s; the checkpoint signed by %s says %s: "+
					"its signer counted other rows than the trail holds", cp.Size, counted.Root, cp.SignedBy(), cp.Counts.Root)
		}
	}
	now, err := tlog.TreeHash(size, tree)
	if err != nil {
		return res, Consistency{}, fmt.Errorf("audit verify: %w", err)
	}
	proof, err := tlog.ProveTree(size, cp.Size, tree)
	if err == nil {
		err = tlog.CheckTree(proof, size, now, cp.Size, cp.Root)
	}
	if err != nil {
		return res, Consistency{}, fail(cp.Size, CheckpointMismatch, "the trail does not extend the checkpoint: %v", err)
	}
	return res, Consistency{Checkpoint: cp, Size: size, Root: now}, nil
}

// firstStoredDifference compares the tree computed from today's rows with
// the one the database stored as the rows came, over the first size
// records, and names the first row whose stored leaf differs: the first row
// changed since. Someone who rewrote the stored tree as well leaves nothing
// to compare, which it says.
func firstStoredDifference(ctx context.Context, trail trailStore, tree *memoryTree, size int64) (int64, string) {
	var want int64
	seq, where := size, ""
	err := trail.TreeHashesBelow(ctx, tlog.StoredHashCount(size), func(idx int64, h []byte) error {
		if idx != want || idx >= int64(len(tree.hashes)) {
			return errStopReading
		}
		want++
		if tlog.Hash(h) == tree.hashes[idx] {
			return nil
		}
		level, n := tlog.SplitStoredHashIndex(idx)
		if level == 0 {
			seq, where = n+1, fmt.Sprintf("seq %d is the first row that is not the one the tree recorded when it was extended", n+1)
		} else {
			where = fmt.Sprintf("the stored tree itself was changed (level %d, record %d)", level, n)
		}
		return errStopReading
	})
	switch {
	case where != "":
		return seq, where
	case err != nil && !errors.Is(err, errStopReading):
		return size, "the stored tree could not be read to say where: " + err.Error()
	}
	return size, "the stored tree was rewritten with the rows, so which row changed first cannot be told"
}

// errStopReading ends a read through a trailStore callback early, as
// intended.
var errStopReading = errors.New("stop reading")

// CheckConsistency checks that the checkpoint newer extends older: the
// same trail, no fewer rows, the same root at the same size, and, when it
// has more rows, proof (tlog's consistency proof from older's size to
// newer's) that older's tree is a prefix of newer's. A failure is a
// *ChainError: checkpoint-origin, checkpoint-rollback or
// checkpoint-mismatch.
func CheckConsistency(older, newer Checkpoint, proof tlog.TreeProof) error {
	fail := func(p Problem, format string, args ...any) error {
		return &ChainError{Problem: p, Detail: fmt.Sprintf(format, args...), Source: "the checkpoints"}
	}
	switch {
	case older.Origin != newer.Origin:
		return fail(CheckpointOrigin, "the older is of trail %q, the newer of %q", older.Origin, newer.Origin)
	case newer.Size < older.Size:
		return fail(CheckpointRollback, "the newer covers %d rows, the older %d: the trail was rolled back, or they were given in the wrong order",
			newer.Size, older.Size)
	case newer.Size == older.Size && newer.Root != older.Root:
		return fail(CheckpointMismatch, "both cover %d rows, with roots %s and %s: two versions of the trail were signed", newer.Size, older.Root, newer.Root)
	case newer.Size == older.Size || older.Size == 0:
		return nil
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Root, older.Size, older.Root); err != nil {
		return fail(CheckpointMismatch, "the tree of %d rows signed by %s does not extend the tree of %d rows signed by %s: %v",
			newer.Size, newer.SignedBy(), older.Size, older.SignedBy(), err)
	}
	return nil
}

// ProveConsistency reads from the tree the database stored the proof that
// its first oldSize records are a prefix of its first newSize. The proof is
// checked against the signed roots, so the database is not trusted for it.
func ProveConsistency(ctx context.Context, pool *pgxpool.Pool, oldSize, newSize int64) (tlog.TreeProof, error) {
	if oldSize <= 0 || oldSize >= newSize {
		return nil, nil
	}
	proof, err := tlog.ProveTree(newSize, oldSize, &storedTree{ctx: ctx, trail: newPostgresTrail(pool)})
	if err != nil {
		return nil, fmt.Errorf("audit consistency: read the proof from the stored tree: %w", err)
	}
	return proof, nil
}

// ErrEvidenceOfAnotherCheckpoint is an evidence export asked to prove that
// newer extends older whose own checkpoint is not newer: the wrong file.
var ErrEvidenceOfAnotherCheckpoint = errors.New("the evidence carries another checkpoint than the newer one: it proves nothing of it")

// CheckConsistencyByEvidence is CheckConsistency with the proof read from
// the header of an evidence export (r, named name in messages), whose own
// checkpoint, checked with verifierKey, must be newer. An export that
// carries no proof from older's size is consistency-unproven.
func CheckConsistencyByEvidence(r io.Reader, name string, older, newer Checkpoint, verifierKey string) error {
	var lineBuf []byte
	first, err := readLine(bufio.NewReaderSize(r, 1<<20), &lineBuf)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	var header evidenceHeader
	if err := json.Unmarshal(bytes.TrimLeft(first, "\xef\xbb\xbf"), &header); err != nil {
		return fmt.Errorf("not the header of an expiryctl evidence export: %w", err)
	}
	if header.Version != 1 {
		return errors.New("not the header of an expiryctl evidence export")
	}
	carried, err := OpenCheckpoint([]byte(header.Checkpoint), verifierKey)
	if err != nil {
		return err
	}
	if carried.TreeHead != newer.TreeHead {
		return fmt.Errorf("%w (it carries the checkpoint of %d rows, the newer covers %d)", ErrEvidenceOfAnotherCheckpoint, carried.Size, newer.Size)
	}
	var proof tlog.TreeProof
	for _, c := range header.Consistency {
		if c.Size != older.Size {
			continue
		}
		var ok bool
		if proof, ok = splitHashes(c.Proof); !ok {
			return &ChainError{Problem: Malformed, Source: name, Detail: fmt.Sprintf("its proof from %d rows is not base64 of whole hashes", older.Size)}
		}
	}
	if proof == nil && older.Size > 0 && older.Size < newer.Size {
		return &ChainError{Problem: ConsistencyUnproven, Source: name, Detail: fmt.Sprintf(
			"it carries no proof from %d rows: ask for an export made with `audit export --from-checkpoint` the older checkpoint", older.Size)}
	}
	return CheckConsistency(older, newer, proof)
}

// Consistency checks that newer extends older, with the proof read from
// the database's stored tree, audited as "audit.verify".
func (r *Reviewer) Consistency(ctx context.Context, older, newer Checkpoint) error {
	proof, err := ProveConsistency(ctx, r.Pool, older.Size, newer.Size)
	if err == nil {
		err = CheckConsistency(older, newer, proof)
	}
	details := map[string]any{"consistency": map[string]any{
		"older": map[string]any{"tree_size": older.Size, "root_hash": older.Root.String(), "signer": older.Signer},
		"newer": map[string]any{"tree_size": newer.Size, "root_hash": newer.Root.String(), "signer": newer.Signer}}}
	return r.recordVerify(ctx, details, Result{}, err)
}
