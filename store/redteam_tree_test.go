package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestRedTeamTreeIsTheServers: no group offers the tree a hash. The form
// that took hashes from the caller is gone, a direct write of a tree hash
// is refused, and the tree the database computes has, for the first row,
// tlog's record hash of that row's chain hash.
func TestRedTeamTreeIsTheServers(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	forged := make([]byte, 32)
	for _, who := range []struct {
		name string
		run  func(sql string, args ...any) error
	}{
		{"the ingester", func(sql string, args ...any) error { _, err := rt.ivan.Pool.Exec(ctx, sql, args...); return err }},
		{"the auditor", func(sql string, args ...any) error { _, err := rt.audrey.Pool.Exec(ctx, sql, args...); return err }},
		{"an admin", func(sql string, args ...any) error { _, err := rt.dave.Pool.Exec(ctx, sql, args...); return err }},
	} {
		if err := who.run(`SELECT expiryctl.audit_tree_extend(0, 1, $1::bytea[])`, [][]byte{forged}); err == nil {
			t.Errorf("%s stored a tree hash of its own", who.name)
		}
		if err := who.run(`INSERT INTO expiryctl.audit_tree (idx, hash) VALUES (0, $1)`, forged); !isPrivilegeError(err) {
			t.Errorf("%s wrote the tree directly: %v", who.name, err)
		}
	}
	var size int64
	if err := rt.ivan.Pool.QueryRow(ctx, `SELECT expiryctl.audit_tree_extend(0, 1000)`).Scan(&size); err != nil || size == 0 {
		t.Fatalf("the ingester cannot extend the tree: %d, %v", size, err)
	}
	var rowHash, leaf []byte
	if err := rt.owner.QueryRow(ctx, `SELECT l.hash, t.hash FROM expiryctl.audit_log l, expiryctl.audit_tree t WHERE l.seq = 1 AND t.idx = 0`).Scan(&rowHash, &leaf); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(append([]byte{0}, rowHash...))
	if !bytes.Equal(leaf, want[:]) {
		t.Fatalf("record 0's stored hash %x, want tlog's record hash of row 1's chain hash %x", leaf, want)
	}
}

// TestRedTeamCheckpointNotes offers checkpoints the database must not
// keep: a garbage note, a note of another trail, a root the tree does not
// have, a size it does not hold. Each is refused, and exports still work.
func TestRedTeamCheckpointNotes(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	var size int64
	if err := rt.audrey.Pool.QueryRow(ctx, `SELECT expiryctl.audit_tree_extend(0, 1000)`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	var origin string
	var root []byte
	if err := rt.owner.QueryRow(ctx, `SELECT origin, expiryctl.audit_tree_root($1) FROM expiryctl.audit_trail`, size).Scan(&origin, &root); err != nil {
		t.Fatal(err)
	}
	text := func(origin string, size int64, root []byte) string {
		return fmt.Sprintf("%s\n%d\n%s\n\n\u2014 audrey AAAA\n", origin, size, base64.StdEncoding.EncodeToString(root))
	}
	other := sha256.Sum256([]byte("another root"))
	record := `SELECT expiryctl.audit_checkpoint_record('', $1, $2, $3)`
	for _, bad := range []struct {
		name string
		size int64
		root []byte
		note string
	}{
		{"a garbage note", size, root, "garbage"},
		{"another trail's origin", size, root, text("expiryctl audit trail 00000000-0000-0000-0000-000000000000", size, root)},
		{"a root the tree does not have", size, other[:], text(origin, size, other[:])},
		{"a note whose root is not the argument", size, root, text(origin, size, other[:])},
		{"no signature line", size, root, fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(root))},
	} {
		refused(t, rt.audrey.Pool, "checkpoint-note", record, bad.size, bad.root, bad.note)
	}
	refused(t, rt.audrey.Pool, "tree-size", record, size+1, root, text(origin, size+1, root))
	// A checkpoint is the auditor's alone, even one of the trail as it is.
	for _, who := range []*pgtest.Login{rt.ivan, rt.dave, rt.alice, rt.bob} {
		refused(t, who.Pool, "privilege", record, size, root, text(origin, size, root))
	}
	if _, err := rt.audrey.Pool.Exec(ctx, record, size, root, text(origin, size, root)); err != nil {
		t.Fatalf("a checkpoint of this trail as it is: %v", err)
	}
}
