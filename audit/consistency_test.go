package audit_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// twoCheckpoints is a trail of 30 rows checkpointed (older), 5 more rows
// and a second checkpoint (newer), both opened with the returned key.
func twoCheckpoints(t *testing.T) (*pgtest.Database, audit.Checkpoint, audit.Checkpoint, string) {
	t.Helper()
	db, _ := newTrail(t, 30)
	skey, vkey, err := audit.GenerateKey("expiryctl-test")
	if err != nil {
		t.Fatal(err)
	}
	sign := func() audit.Checkpoint {
		signed, err := audit.SignCheckpoint(context.Background(), db.Pool, "audrey", skey)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := audit.OpenCheckpoint(signed.Note, vkey)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	older := sign()
	seedChain(t, db.Pool, 5)
	return db, older, sign(), vkey
}

// forgetCheckpoint deletes a stored checkpoint as a superuser can, behind
// the table's guards.
func forgetCheckpoint(t *testing.T, db *pgtest.Database, size int64) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{`ALTER TABLE expiryctl.audit_checkpoints DISABLE TRIGGER ALL`,
			`DELETE FROM expiryctl.audit_checkpoints WHERE tree_size = $1`,
			`ALTER TABLE expiryctl.audit_checkpoints ENABLE TRIGGER ALL`} {
			var args []any
			if stmt[0] == 'D' {
				args = append(args, size)
			}
			if _, err := tx.Exec(ctx, stmt, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func evidence(t *testing.T, db *pgtest.Database, f audit.Filter, from ...int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, f, from...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func wantProblem(t *testing.T, err error, want audit.Problem) {
	t.Helper()
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	t.Log(err)
}

// TestEvidenceExtendsTheReviewersCheckpoint: an export proves its
// checkpoint extends the stored ones before it; a reviewer holding an older
// checkpoint checks that offline, and one holding a newer checkpoint than
// the export's sees a rollback.
func TestEvidenceExtendsTheReviewersCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, older, newer, vkey := twoCheckpoints(t)
	filtered := audit.Filter{Action: "dlq.show"}

	t.Run("a filtered export proves it extends the stored checkpoint before it", func(t *testing.T) {
		res, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, older)
		if err != nil || res.Extends != older.Size || len(res.Consistent) != 1 || res.Consistent[0] != older.Size {
			t.Fatalf("VerifyEvidenceExtends = %+v, %v; want it to extend %d", res, err, older.Size)
		}
	})
	t.Run("a whole-trail export shows it by its rows", func(t *testing.T) {
		if _, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, audit.Filter{})), "f", vkey, older); err != nil {
			t.Fatal(err)
		}
		rewritten := older
		rewritten.Root = tlog.Hash{1}
		_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, audit.Filter{})), "f", vkey, rewritten)
		wantProblem(t, err, audit.CheckpointMismatch)
	})
	t.Run("a checkpoint of the same size with another root is a fork", func(t *testing.T) {
		forked := newer
		forked.Root = tlog.Hash{2}
		_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, forked)
		wantProblem(t, err, audit.CheckpointMismatch)
	})
	t.Run("an older tree than the one proved is a rewrite", func(t *testing.T) {
		rewritten := older
		rewritten.Root = tlog.Hash{3}
		_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, rewritten)
		wantProblem(t, err, audit.CheckpointMismatch)
	})
	t.Run("another trail's checkpoint", func(t *testing.T) {
		other := older
		other.Origin = "expiryctl audit trail elsewhere"
		_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, other)
		wantProblem(t, err, audit.CheckpointOrigin)
	})

	// The newest checkpoint deleted: exports fall back to the older one.
	forgetCheckpoint(t, db, newer.Size)
	t.Run("with the newest checkpoint deleted, the reviewer holding it sees a rollback", func(t *testing.T) {
		_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, newer)
		wantProblem(t, err, audit.CheckpointRollback)
		var buf bytes.Buffer
		if _, err := audit.ExportEvidence(ctx, db.Pool, &buf, filtered, newer.Size); err == nil {
			t.Fatal("an export asked to extend a checkpoint newer than any stored one was written")
		}
	})
}

// TestEvidenceWithoutAProofFromTheHeldCheckpoint: a checkpoint the database
// no longer stores has no proof in the export, unless the reviewer names it.
func TestEvidenceWithoutAProofFromTheHeldCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, older, _, vkey := twoCheckpoints(t)
	forgetCheckpoint(t, db, older.Size)
	filtered := audit.Filter{Action: "dlq.show"}
	_, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered)), "f", vkey, older)
	wantProblem(t, err, audit.ConsistencyUnproven)
	if _, err := audit.VerifyEvidenceExtends(ctx, bytes.NewReader(evidence(t, db, filtered, older.Size)), "f", vkey, older); err != nil {
		t.Fatalf("an export made --from-checkpoint the held one: %v", err)
	}
}

// TestCheckpointConsistency checks two checkpoints with the proof from the
// stored tree, and the refusals: wrong order, a fork, a garbage proof.
func TestCheckpointConsistency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, older, newer, _ := twoCheckpoints(t)
	r := &audit.Reviewer{Pool: db.Pool, Actor: "auditor"}
	if err := r.Consistency(ctx, older, newer); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, r.Consistency(ctx, newer, older), audit.CheckpointRollback)
	forked := older
	forked.Root = tlog.Hash{4}
	wantProblem(t, r.Consistency(ctx, forked, newer), audit.CheckpointMismatch)
	proof, err := audit.ProveConsistency(ctx, db.Pool, older.Size, newer.Size)
	if err != nil || len(proof) == 0 {
		t.Fatalf("ProveConsistency = %v, %v", proof, err)
	}
	proof[0][0] ^= 1
	wantProblem(t, audit.CheckConsistency(older, newer, proof), audit.CheckpointMismatch)

	// Each check is recorded, its result with it.
	var failed int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log
		WHERE action = 'audit.verify' AND details ? 'consistency' AND outcome = 'error'`).Scan(&failed); err != nil || failed != 2 {
		t.Fatalf("%d failed consistency checks recorded (%v), want 2", failed, err)
	}
}

// TestConsistencyByEvidence: the proof read from an evidence header, from
// the right file only, and named unproven when the header carries none.
func TestConsistencyByEvidence(t *testing.T) {
	t.Parallel()
	db, older, newer, vkey := twoCheckpoints(t)
	filtered := audit.Filter{Action: "dlq.show"}
	file := evidence(t, db, filtered)
	if err := audit.CheckConsistencyByEvidence(bytes.NewReader(file), "f", older, newer, vkey); err != nil {
		t.Fatal(err)
	}
	if err := audit.CheckConsistencyByEvidence(bytes.NewReader(file), "f", older, older, vkey); !errors.Is(err, audit.ErrEvidenceOfAnotherCheckpoint) {
		t.Fatalf("the evidence of another checkpoint: %v", err)
	}
	forgetCheckpoint(t, db, older.Size)
	err := audit.CheckConsistencyByEvidence(bytes.NewReader(evidence(t, db, filtered)), "f", older, newer, vkey)
	wantProblem(t, err, audit.ConsistencyUnproven)
}
