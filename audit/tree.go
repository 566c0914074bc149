package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/store"
)

// The trail's Merkle tree: record n is the row of seq n+1, and its data is
// the row's chain hash, which covers every field and the row before. The
// hashes are tlog's (RFC 6962), stored by their tlog.StoredHashIndex in
// expiryctl.audit_tree, whose first audit_trail.tree_size records are in.

// extendBatch bounds the records added to the tree in one transaction.
const extendBatch = 20000

// storedTree reads stored hashes through trail, as a tlog.HashReader.
type storedTree struct {
	ctx   context.Context
	trail trailStore
}

// ReadHashes implements tlog.HashReader.
func (t *storedTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	found := make(map[int64]tlog.Hash, len(indexes))
	err := t.trail.TreeHashes(t.ctx, indexes, func(idx int64, h []byte) error {
		if len(h) != tlog.HashSize {
			return fmt.Errorf("audit tree: stored hash %d is %d bytes, not %d", idx, len(h), tlog.HashSize)
		}
		found[idx] = tlog.Hash(h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := found[idx]
		if !ok {
			return nil, fmt.Errorf("audit tree: stored hash %d is missing", idx)
		}
		out[i] = h
	}
	return out, nil
}

// TreeHead is the size and root hash of the trail's tree.
type TreeHead struct {
	// Origin names the trail (audit_trail.origin).
	Origin string
	Size   int64
	Root   tlog.Hash
	// Counts is the head of the count tree of the first Size rows
	// (counts.go), which a checkpoint signs beside the trail's; zero when
	// it carries none.
	Counts CountsHead
}

// ExtendTree adds every row appended since the tree was last extended, and
// returns the tree's head. Rows are read in order from the tree's end; a
// concurrent extender makes the database refuse the second (rule
// tree-moved), which then starts again from the new end.
func ExtendTree(ctx context.Context, pool *pgxpool.Pool) (TreeHead, error) {
	trail := newPostgresTrail(pool)
	for {
		grew, err := extendOnce(ctx, trail)
		var r *store.Refusal
		if errors.As(err, &r) && r.Rule == "tree-moved" {
			continue
		}
		if err != nil {
			return TreeHead{}, fmt.Errorf("extend the audit tree: %w", err)
		}
		if !grew {
			return readTreeHead(ctx, trail)
		}
	}
}

// extendOnce adds up to extendBatch rows to the tree, in one transaction:
// the database computes their hashes from its own rows
// (audit_tree_extend); grew says whether it added any.
func extendOnce(ctx context.Context, trail trailStore) (grew bool, err error) {
	err = trail.InTx(ctx, func(tx trailStore) error {
		_, size, err := tx.TrailGet(ctx)
		if err != nil {
			return err
		}
		newSize, err := tx.TreeExtend(ctx, size, extendBatch)
		grew = newSize > size
		return err
	})
	return grew, err
}

// ReadTreeHead returns the head of the tree as stored, without extending
// it: O(log n) stored hashes.
func ReadTreeHead(ctx context.Context, q store.Querier) (TreeHead, error) {
	return readTreeHead(ctx, newPostgresTrail(q))
}

func readTreeHead(ctx context.Context, trail trailStore) (TreeHead, error) {
	var head TreeHead
	var err error
	if head.Origin, head.Size, err = trail.TrailGet(ctx); err != nil {
		return TreeHead{}, fmt.Errorf("read the audit tree: %w", err)
	}
	root, err := tlog.TreeHash(head.Size, &storedTree{ctx: ctx, trail: trail})
	if err != nil {
		return TreeHead{}, fmt.Errorf("read the audit tree: %w", err)
	}
	head.Root = root
	return head, nil
}

// memoryTree is a whole tree computed from the rows, in memory: what a
// verifier builds so that it trusts no hash the database stored.
type memoryTree struct{ hashes []tlog.Hash }

// ReadHashes implements tlog.HashReader.
func (m *memoryTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("audit tree: hash %d is beyond the %d computed", idx, len(m.hashes))
		}
		out[i] = m.hashes[idx]
	}
	return out, nil
}

// add appends record n's stored hashes; records must come in order.
func (m *memoryTree) add(n int64, data []byte) error {
	hashes, err := tlog.StoredHashes(n, data, m)
	if err != nil {
		return err
	}
	m.hashes = append(m.hashes, hashes...)
	return nil
}
