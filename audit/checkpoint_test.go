package audit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// checkpointed returns a trail of n seeded rows with a signed checkpoint of
// it, the checkpoint as a reviewer holds it, and its verifier key.
func checkpointed(t *testing.T, n int64) (*pgtest.Database, audit.Checkpoint, string) {
	t.Helper()
	db, _ := newTrail(t, n)
	skey, vkey, err := audit.GenerateKey("expiryctl-test")
	if err != nil {
		t.Fatal(err)
	}
	signed, err := audit.SignCheckpoint(context.Background(), db.Pool, "audrey", skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.OpenCheckpoint(signed.Note, vkey)
	if err != nil {
		t.Fatalf("the checkpoint just signed does not open: %v\n%s", err, signed.Note)
	}
	if cp.Size != n || cp.Root != signed.Root {
		t.Fatalf("checkpoint of %d rows (root %s), want %d rows (root %s)", cp.Size, cp.Root, n, signed.Root)
	}
	return db, cp, vkey
}

// tamperTree runs sql with the audit tree's guards off.
func tamperTree(t *testing.T, db *pgtest.Database, sql string) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{`ALTER TABLE expiryctl.audit_tree DISABLE TRIGGER ALL`, sql,
			`ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_update`,
			`ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_truncate`} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCheckpointCatchesRewrites tampers with a checkpointed trail as
// its owner can, behind the append-only guards, re-chaining every hash so
// that the chain alone verifies, and checks that verifying against the
// signed checkpoint names the first difference.
func TestVerifyCheckpointCatchesRewrites(t *testing.T) {
	t.Parallel()
	const n = 40
	cases := []struct {
		name        string
		tamper      []string
		rebuildTree bool // rewrite the stored tree from the tampered rows too
		wantSeq     int64
		wantProblem audit.Problem
	}{
		{name: "one row edited", tamper: []string{`UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 20`},
			wantSeq: 21, wantProblem: audit.BrokenLink},
		{name: "a row edited and every later hash recomputed", tamper: []string{
			`UPDATE expiryctl.audit_log SET target = 'dead_letter:666' WHERE seq = 10`, fmt.Sprintf(rechainFrom, 10)},
			wantSeq: 10, wantProblem: audit.CheckpointMismatch},
		{name: "the whole chain rewritten with recomputed hashes", tamper: []string{
			`UPDATE expiryctl.audit_log SET actor = 'mallory'`, fmt.Sprintf(rechainFrom, 1)},
			wantSeq: 1, wantProblem: audit.CheckpointMismatch},
		{name: "the tail truncated", tamper: []string{`DELETE FROM expiryctl.audit_log WHERE seq > 30`},
			wantSeq: 31, wantProblem: audit.CheckpointTruncated},
		{name: "a forged row inserted and the rest renumbered", tamper: []string{
			`UPDATE expiryctl.audit_log SET seq = -seq WHERE seq >= 25`,
			`UPDATE expiryctl.audit_log SET seq = -seq + 1 WHERE seq <= -25`,
			`INSERT INTO expiryctl.audit_log (seq, at, actor, db_role, action, target, details, outcome, prev_hash)
			 SELECT 25, at, 'mallory', 'root', 'replay.approve', 'replay_request:9', '{}', 'ok', '\x00'
			 FROM expiryctl.audit_log WHERE seq = 24`,
			fmt.Sprintf(rechainFrom, 25)},
			wantSeq: 25, wantProblem: audit.CheckpointMismatch},
		{name: "rows rewritten and the stored tree rebuilt from them", tamper: []string{
			`UPDATE expiryctl.audit_log SET outcome = 'refused' WHERE seq = 12`, fmt.Sprintf(rechainFrom, 12)},
			rebuildTree: true, wantSeq: n, wantProblem: audit.CheckpointMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, cp, _ := checkpointed(t, n)
			ctx := context.Background()
			if _, _, err := audit.VerifyAgainstCheckpoint(ctx, db.Pool, cp); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			// As a superuser, who can do anything the owner can and more.
			superuser := db.Superuser(t)
			for _, sql := range c.tamper {
				tamper(t, superuser, sql)
			}
			if c.rebuildTree {
				tamperTree(t, db, `DELETE FROM expiryctl.audit_tree`)
				if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.audit_trail SET tree_size = 0`); err != nil {
					t.Fatal(err)
				}
				if _, err := audit.ExtendTree(ctx, db.Pool); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := audit.VerifyAgainstCheckpoint(ctx, db.Pool, cp)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) {
				t.Fatalf("VerifyAgainstCheckpoint = %v; want a *ChainError", err)
			}
			if chainErr.Seq != c.wantSeq || chainErr.Problem != c.wantProblem {
				t.Fatalf("first bad seq %d (%s), want %d (%s): %v", chainErr.Seq, chainErr.Problem, c.wantSeq, c.wantProblem, err)
			}
			t.Log(err)
		})
	}
}

func TestVerifyCheckpointAcceptsAnExtendedTrail(t *testing.T) {
	t.Parallel()
	db, cp, _ := checkpointed(t, 30)
	seedChain(t, db.Pool, 17)
	res, cons, err := audit.VerifyAgainstCheckpoint(context.Background(), db.Pool, cp)
	if err != nil {
		t.Fatal(err)
	}
	// 30 seeded, the checkpoint's own audit row, 17 more.
	if cons.Size != 48 || res.Rows != 48 || cons.Checkpoint.Size != 30 {
		t.Errorf("consistency %+v, result %+v: want a trail of 48 rows extending the checkpoint of 30", cons, res)
	}
}

func TestCheckpointSignatureAndOrigin(t *testing.T) {
	t.Parallel()
	db, cp, vkey := checkpointed(t, 5)
	_, otherKey, err := audit.GenerateKey("someone-else")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.OpenCheckpoint(cp.Note, otherKey); err == nil || !strings.Contains(err.Error(), "not signed by someone-else") {
		t.Errorf("a checkpoint opened with another key: %v", err)
	}
	forged := strings.Replace(string(cp.Note), "\n5\n", "\n4\n", 1)
	if _, err := audit.OpenCheckpoint([]byte(forged), vkey); err == nil {
		t.Error("a checkpoint whose size was edited still opens")
	}
	_, otherCP, _ := checkpointed(t, 5)
	_, _, err = audit.VerifyAgainstCheckpoint(context.Background(), db.Pool, otherCP)
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.CheckpointOrigin {
		t.Errorf("a checkpoint of another trail: %v, want %s", err, audit.CheckpointOrigin)
	}
}

// TestExtendTreeStoresTlogHashes: the stored tree is tlog's over the rows'
// chain hashes, also when extenders race and when it grows in steps.
func TestExtendTreeStoresTlogHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 25)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = audit.ExtendTree(ctx, db.Pool)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seedChain(t, db.Pool, 12)
	head, err := audit.ExtendTree(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT hash FROM expiryctl.audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	var want []tlog.Hash
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = want[x]
		}
		return out, nil
	})
	for n, leaf := range leaves {
		hashes, err := tlog.StoredHashes(int64(n), leaf, reader)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hashes...)
	}
	root, err := tlog.TreeHash(int64(len(leaves)), reader)
	if err != nil {
		t.Fatal(err)
	}
	if head.Size != int64(len(leaves)) || head.Root != root {
		t.Errorf("tree head %d %s, want %d %s", head.Size, head.Root, len(leaves), root)
	}
	var stored int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_tree`).Scan(&stored); err != nil || stored != int64(len(want)) {
		t.Errorf("%d stored hashes (%v), want %d", stored, err, len(want))
	}
}

// TestCheckpointAsPeople: an auditor signs checkpoints; an operator can
// neither sign one nor write the tree with raw SQL.
func TestCheckpointAsPeople(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 5)
	audrey := db.Login(t, "audrey", "expiryctl_auditor")
	alice := db.Login(t, "alice", "expiryctl_operator")
	skey, _, err := audit.GenerateKey("expiryctl-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.SignCheckpoint(ctx, audrey.Pool, "", skey); err != nil {
		t.Fatalf("an auditor's checkpoint: %v", err)
	}
	_, err = audit.SignCheckpoint(ctx, alice.Pool, "", skey)
	var refusal *store.Refusal
	if !errors.As(err, &refusal) {
		t.Errorf("an operator's checkpoint: %v, want a refusal", err)
	}
	for _, sql := range []string{
		`INSERT INTO expiryctl.audit_tree VALUES (9999, sha256('x'))`,
		`INSERT INTO expiryctl.audit_checkpoints (tree_size, root_hash, signed_note) VALUES (1, sha256('x'), 'forged')`,
		`UPDATE expiryctl.audit_trail SET tree_size = 0`,
		`SELECT expiryctl.audit_tree_extend(6, 6)`,
	} {
		if _, err := alice.Pool.Exec(ctx, sql); err == nil {
			t.Errorf("an operator ran %s", sql)
		}
	}
	if _, err := audrey.Pool.Exec(ctx, `DELETE FROM expiryctl.audit_checkpoints`); err == nil {
		t.Error("an auditor deleted checkpoints")
	}
}
