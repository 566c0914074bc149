package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// The trail's Merkle tree: record n is the row of seq n+1, and its data is
// the row's chain hash, which covers every field and the row before. The
// hashes are tlog's (RFC 6962), stored by their tlog.StoredHashIndex in
// expiryctl.audit_tree, whose first audit_trail.tree_size records are in.

// extendBatch bounds the records added to the tree in one transaction.
const extendBatch = 20000

// storedTree reads stored hashes from the database, and from the hashes
// about to be stored (pending, from index pendingFrom on), as a
// tlog.HashReader.
type storedTree struct {
	ctx         context.Context
	q           store.Querier
	pending     []tlog.Hash
	pendingFrom int64
}

// ReadHashes implements tlog.HashReader.
func (t *storedTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var want []int64
	for i, idx := range indexes {
		if p := idx - t.pendingFrom; t.pending != nil && p >= 0 && p < int64(len(t.pending)) {
			out[i] = t.pending[p]
			continue
		}
		want = append(want, idx)
	}
	if len(want) == 0 {
		return out, nil
	}
	rows, err := t.q.Query(t.ctx, `SELECT idx, hash FROM expiryctl.audit_tree WHERE idx = ANY($1)`, want)
	if err != nil {
		return nil, err
	}
	found := make(map[int64]tlog.Hash, len(want))
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			rows.Close()
			return nil, err
		}
		if len(h) != tlog.HashSize {
			rows.Close()
			return nil, fmt.Errorf("audit tree: stored hash %d is %d bytes, not %d", idx, len(h), tlog.HashSize)
		}
		found[idx] = tlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, idx := range indexes {
		if p := idx - t.pendingFrom; t.pending != nil && p >= 0 && p < int64(len(t.pending)) {
			continue
		}
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
}

// ExtendTree adds every row appended since the tree was last extended, and
// returns the tree's head. Rows are read in order from the tree's end; a
// concurrent extender makes the database refuse the second (rule
// tree-moved), which then starts again from the new end.
func ExtendTree(ctx context.Context, pool *pgxpool.Pool) (TreeHead, error) {
	for {
		grew, err := extendOnce(ctx, pool)
		var r *store.Refusal
		if errors.As(err, &r) && r.Rule == "tree-moved" {
			continue
		}
		if err != nil {
			return TreeHead{}, fmt.Errorf("extend the audit tree: %w", err)
		}
		if !grew {
			return ReadTreeHead(ctx, pool)
		}
	}
}

// extendOnce adds up to extendBatch rows to the tree; grew says whether it
// added any.
func extendOnce(ctx context.Context, pool *pgxpool.Pool) (grew bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var size int64
		if err := tx.QueryRow(ctx, `SELECT tree_size FROM expiryctl.audit_trail WHERE singleton`).Scan(&size); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT seq, hash FROM expiryctl.audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`, size, extendBatch)
		if err != nil {
			return err
		}
		tree := &storedTree{ctx: ctx, q: tx, pendingFrom: tlog.StoredHashCount(size)}
		tree.pending = []tlog.Hash{}
		var leaves [][]byte
		for rows.Next() {
			var seq int64
			var h []byte
			if err := rows.Scan(&seq, &h); err != nil {
				rows.Close()
				return err
			}
			if want := size + int64(len(leaves)) + 1; seq != want {
				rows.Close()
				return fmt.Errorf("the trail has seq %d where seq %d belongs: `expiryctl audit verify` says what changed", seq, want)
			}
			leaves = append(leaves, h)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(leaves) == 0 {
			return nil
		}
		for i, leaf := range leaves {
			hashes, err := tlog.StoredHashes(size+int64(i), leaf, tree)
			if err != nil {
				return err
			}
			tree.pending = append(tree.pending, hashes...)
		}
		newSize := size + int64(len(leaves))
		encoded := make([][]byte, len(tree.pending))
		for i := range tree.pending {
			encoded[i] = tree.pending[i][:]
		}
		if _, err := tx.Exec(ctx, `SELECT expiryctl.audit_tree_extend($1, $2, $3)`, size, newSize, encoded); err != nil {
			return store.AsRefusal(err)
		}
		grew = true
		return nil
	})
	return grew, err
}

// ReadTreeHead returns the head of the tree as stored, without extending
// it: O(log n) stored hashes.
func ReadTreeHead(ctx context.Context, q store.Querier) (TreeHead, error) {
	var head TreeHead
	if err := q.QueryRow(ctx, `SELECT coalesce(origin, ''), tree_size FROM expiryctl.audit_trail WHERE singleton`).Scan(&head.Origin, &head.Size); err != nil {
		return TreeHead{}, fmt.Errorf("read the audit tree: %w", err)
	}
	root, err := tlog.TreeHash(head.Size, &storedTree{ctx: ctx, q: q})
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
