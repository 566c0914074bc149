package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"reflect"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestProverProofsAreTlogs: the shortcut for the left part of a tree gives
// exactly the proofs tlog.ProveRecord gives, for every leaf of trees of
// every size up to 130, and they check.
func TestProverProofsAreTlogs(t *testing.T) {
	t.Parallel()
	tree := &memoryTree{}
	for n := int64(0); n < 130; n++ {
		leaf := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(n)))
		if err := tree.add(n, leaf[:]); err != nil {
			t.Fatal(err)
		}
		size := n + 1
		root, err := tlog.TreeHash(size, tree)
		if err != nil {
			t.Fatal(err)
		}
		p := &prover{size: size, reader: tree}
		for m := int64(0); m < size; m++ {
			got, err := p.proveRecord(m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tlog.ProveRecord(size, m, tree)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("size %d leaf %d: proof %v, tlog's %v", size, m, got, want)
			}
			lh := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(m)))
			if err := tlog.CheckRecord(got, size, root, m, tlog.RecordHash(lh[:])); err != nil {
				t.Fatalf("size %d leaf %d: %v", size, m, err)
			}
		}
	}
}
