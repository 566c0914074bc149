package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
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
