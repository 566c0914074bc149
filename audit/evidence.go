package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/store"
)

// Evidence is the export format a reviewer verifies alone: a header line
// (the newest signed checkpoint, the filter, the seqs it matched, and
// proofs that the checkpoint extends earlier ones), then one ndjson row per
// matched row, as NDJSON writes it plus, in a filtered export, "proof", the
// row's tlog inclusion proof in the checkpointed tree (absent for rows
// newer than the checkpoint): its hashes, bottom up, concatenated and
// base64-encoded as one string, which a reader decodes at a fraction of
// the cost of a JSON array of strings. A whole-trail export has no proofs:
// its verifier computes the tree of its rows.
const Evidence Format = "evidence"

// evidenceHeader is the first line of an evidence export.
type evidenceHeader struct {
	// Version marks the file as evidence; it is 1.
	Version    int    `json:"expiryctl_audit_evidence"`
	Origin     string `json:"origin"`
	Checkpoint string `json:"checkpoint"`
	Filter     Filter `json:"filter"`
	// Matched lists the seqs of every row the filter matched, oldest
	// first: a row removed from the file is missing from this list's rows.
	Matched []int64 `json:"matched"`
	// Consistency proves that the checkpoint extends earlier ones: the
	// stored checkpoints before it and any the exporter was asked for.
	Consistency []consistencyProof `json:"consistency,omitempty"`
	// Counts proves, for a filter on one of action, actor and target, how
	// many rows of its value the checkpoint's rows hold: the count tree's
	// bucket of the value, whole, with its inclusion proof.
	Counts *countProof `json:"counts,omitempty"`
}

// consistencyProof is tlog's proof that the tree of Size records with
// root Root is a prefix of the checkpoint's tree: its hashes concatenated
// in one base64 string, as a row's proof is.
type consistencyProof struct {
	Size  int64  `json:"size"`
	Root  string `json:"root"`
	Proof string `json:"proof"`
}

// maxConsistencyProofs is how many of the stored checkpoints before the
// newest an export proves its checkpoint consistent with: the newest
// recentConsistencyProofs of them, then, further back, the newest at or
// below each halving of the tree's size, so that a reviewer's checkpoint
// of last month is as likely covered as this hour's. A reviewer who holds
// another names it (`audit export --from-checkpoint`).
const (
	maxConsistencyProofs    = 16
	recentConsistencyProofs = 8
	// storedSizesRead bounds the earlier checkpoints' sizes read to pick
	// from.
	storedSizesRead = 4096
)

// pickConsistencySizes picks from stored, the sizes of earlier
// checkpoints largest first, those an export proves consistency with.
func pickConsistencySizes(stored []int64, size int64) []int64 {
	picked := append([]int64{}, stored[:min(len(stored), recentConsistencyProofs)]...)
	rest := stored[len(picked):]
	for target := size / 2; target > 0 && len(picked) < maxConsistencyProofs && len(rest) > 0; target /= 2 {
		i := sort.Search(len(rest), func(i int) bool { return rest[i] <= target })
		if i == len(rest) {
			break
		}
		picked = append(picked, rest[i])
		rest = rest[i+1:]
	}
	return picked
}

// evidenceRow is one row of an evidence export.
type evidenceRow struct {
	fileRow
	Proof *string `json:"proof,omitempty"`
}

// EvidenceResult says what an evidence export wrote, or what verifying
// one proved.
type EvidenceResult struct {
	// Rows is the rows written (or read); Proved those with an inclusion
	// proof in the checkpoint, the rest being newer than it.
	Rows, Proved int64
	Checkpoint   Checkpoint
	// Consistent lists the sizes of the earlier trees the checkpoint was
	// proved to extend; Extends is the size of the reviewer's own
	// checkpoint it extends, when one was given.
	Consistent []int64
	Extends    int64
	// Complete reports whether the file holds every row its filter matches
	// up to the checkpoint: a whole-trail export, or one whose filter the
	// checkpoint's count tree settles (Count). Unproven says why not,
	// when it is false.
	Complete bool
	Count    *CountClaim
	Unproven string
}

// DefaultFormat is the format of an export that names none: evidence for a
// filtered export of a trail that has a checkpoint to prove rows against,
// ndjson otherwise.
func DefaultFormat(ctx context.Context, q store.Querier, f Filter) (Format, error) {
	if f.IsZero() {
		return NDJSON, nil
	}
	cp, err := LatestCheckpoint(ctx, q)
	if err != nil {
		return "", fmt.Errorf("audit export: read the newest checkpoint: %w", err)
	}
	if cp == nil {
		return NDJSON, nil
	}
	return Evidence, nil
}

// newestCheckpoint reads the newest stored checkpoint, unverified: the
// exporter passes it on, and the reviewer checks its signature.
func newestCheckpoint(ctx context.Context, trail trailStore) (Checkpoint, error) {
	msg, err := trail.CheckpointLatest(ctx)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit export: read the newest checkpoint: %w", err)
	}
	if msg == nil {
		return Checkpoint{}, errors.New("audit export: the trail has no signed checkpoint to prove rows against: sign one with `expiryctl audit checkpoint --key FILE` first")
	}
	n, err := noteText(msg)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit export: the newest stored checkpoint: %w", err)
	}
	head, err := parseCheckpointText(n)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit export: the newest stored checkpoint: %w", err)
	}
	return Checkpoint{TreeHead: head, Note: msg}, nil
}

// loadThreshold is the number of rows from which an export reads the whole
// stored tree once rather than O(log n) hashes per row.
const loadThreshold = 2048

// ExportEvidence writes the rows matching f as an evidence export, with
// inclusion proofs in the newest stored checkpoint, and proofs that this
// checkpoint extends the stored checkpoints before it and those of the
// sizes in from (checkpoints a reviewer holds). Without a checkpoint there
// is nothing to prove against, and it says how to make one.
func ExportEvidence(ctx context.Context, pool *pgxpool.Pool, w io.Writer, f Filter, from ...int64) (EvidenceResult, error) {
	trail := newPostgresTrail(pool)
	cp, err := newestCheckpoint(ctx, trail)
	if err != nil {
		return EvidenceResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	matched, err := trail.AuditSeqs(ctx, f)
	if err != nil {
		return EvidenceResult{}, fmt.Errorf("audit export: %w", err)
	}
	if matched == nil {
		matched = []int64{} // the header lists no rows as [], not null
	}
	// An export of the whole trail carries no proofs: its verifier computes
	// the tree of all its rows and compares the root.
	whole := f.IsZero()
	var reader tlog.HashReader = &storedTree{ctx: ctx, trail: trail}
	if !whole && len(matched) >= loadThreshold {
		tree, err := loadStoredTree(ctx, trail, cp.Size)
		if err != nil {
			return EvidenceResult{}, fmt.Errorf("audit export: %w", err)
		}
		reader = tree
	}

	consistency, err := proveConsistency(ctx, trail, reader, cp, from)
	if err != nil {
		return EvidenceResult{}, err
	}
	counts, err := proveCompleteness(ctx, trail, cp, f, matched)
	if err != nil {
		return EvidenceResult{}, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	header, err := json.Marshal(evidenceHeader{Version: 1, Origin: cp.Origin, Checkpoint: string(cp.Note), Filter: f, Matched: matched,
		Consistency: consistency, Counts: counts})
	if err != nil {
		return EvidenceResult{}, err
	}
	if _, err := bw.Write(append(header, '\n')); err != nil {
		return EvidenceResult{}, fmt.Errorf("audit export: %w", err)
	}
	enc := &encoder{format: NDJSON, buf: make([]byte, 0, 4096)}
	res := EvidenceResult{Checkpoint: cp}
	// The rows streamed are those listed: no later one.
	last := lastOr(matched, 0)
	rows := rowRange{Filter: f, Last: &last}
	if whole {
		err = trail.AuditRange(ctx, rows, func(r *rawRow) error {
			res.Rows++
			if r.seq <= cp.Size {
				res.Proved++
			}
			_, err := bw.Write(enc.row(r, true))
			return err
		})
	} else {
		prover := newProver(ctx, cp.Size, reader, bw, len(matched) >= loadThreshold)
		err = trail.AuditRange(ctx, rows, func(r *rawRow) error {
			row := enc.row(r, true)
			res.Rows++
			if r.seq <= cp.Size {
				res.Proved++
			}
			return prover.add(r.seq, row[:len(row)-2]) // without "}\n"
		})
		if err == nil {
			err = prover.finish()
		} else {
			prover.abandon()
		}
	}
	if err != nil {
		cancel()
		return res, fmt.Errorf("audit export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return res, fmt.Errorf("audit export: %w", err)
	}
	return res, nil
}

// proveCompleteness proves, for a filter on one field that cp's count tree
// settles, how many of cp's rows hold its value: the value's bucket from
// the stored count tree, when it still counts cp's rows and gives cp's
// root, or else from the rows counted again. It returns nil for any other
// filter, or a checkpoint without a count tree. matched, the rows the
// filter matches, must hold as many up to cp as the count: a row deleted
// since the checkpoint is refused here rather than left out of the file.
func proveCompleteness(ctx context.Context, trail trailStore, cp Checkpoint, f Filter, matched []int64) (*countProof, error) {
	field, value, ok := countFilter(f)
	if !ok || cp.Counts.IsZero() {
		return nil, nil
	}
	var proof *countProof
	err := trail.Snapshot(ctx, func(snap trailStore) error {
		counted, err := snap.CountsSize(ctx)
		if err != nil || counted != cp.Size {
			return err
		}
		tree, err := readCountTree(ctx, snap, []int{bucketOf(field, value)})
		if err != nil {
			return err
		}
		if root, err := tree.root(); err == nil && root == cp.Counts {
			proof, err = tree.prove(field, value)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit export: read the count tree: %w", err)
	}
	if proof == nil {
		// The stored tree counts other rows (a newer checkpoint is being
		// kept, or the newest was removed): count them again.
		tally := newCountTally(cp.Size)
		if err := trail.AuditCounts(ctx, cp.Size, tally.put); err != nil {
			return nil, fmt.Errorf("audit export: count the checkpoint's rows: %w", err)
		}
		tree := countTreeOf(tally)
		if root, err := tree.root(); err != nil || root != cp.Counts {
			return nil, &ChainError{Problem: CheckpointMismatch, Source: "the database", Detail: fmt.Sprintf(
				"the first %d rows, counted by action, actor and target, no longer give the count tree the newest checkpoint signs: "+
					"rows up to it were changed or removed; `expiryctl audit verify --checkpoint` names the first", cp.Size)}
		}
		if proof, err = tree.prove(field, value); err != nil {
			return nil, fmt.Errorf("audit export: %w", err)
		}
	}
	claim, err := checkCountProof(cp.Counts, field, value, proof)
	if err != nil {
		return nil, fmt.Errorf("audit export: the count tree's proof: %w", err)
	}
	if held := int64(sort.Search(len(matched), func(i int) bool { return matched[i] > cp.Size })); held != claim.Count {
		return nil, &ChainError{Problem: CheckpointMismatch, Source: "the database", Detail: fmt.Sprintf(
			"the checkpoint counts %s of %s %q up to seq %d, the database holds %d: rows were removed since it was signed; "+
				"`expiryctl audit verify --checkpoint` names the first", plural(claim.Count, "row"), field, value, cp.Size, held)}
	}
	return proof, nil
}

// proveConsistency proves cp's tree consistent with the trees of the
// stored checkpoints before it and of the sizes in from. A size above
// cp's is a checkpoint newer than any the database still stores: the
// checkpoints, or the trail, were rolled back.
func proveConsistency(ctx context.Context, trail trailStore, reader tlog.HashReader, cp Checkpoint, from []int64) ([]consistencyProof, error) {
	stored, err := trail.CheckpointSizesBelow(ctx, cp.Size, storedSizesRead)
	if err != nil {
		return nil, fmt.Errorf("audit export: read the earlier checkpoints: %w", err)
	}
	sizes := pickConsistencySizes(stored, cp.Size)
	for _, n := range from {
		if n > cp.Size {
			return nil, &ChainError{Problem: CheckpointRollback, Source: "the database", Detail: fmt.Sprintf(
				"the checkpoint you hold covers %d rows, the newest the database stores %d: newer checkpoints were removed, "+
					"or the trail was rolled back; report it to whoever governs this database", n, cp.Size)}
		}
		if n < cp.Size && !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	sizes = slices.DeleteFunc(sizes, func(n int64) bool { return n == 0 }) // the empty tree is a prefix of every tree
	if _, stored := reader.(*storedTree); stored && len(sizes) > 0 {
		if reader, err = prefetched(reader, cp.Size, sizes); err != nil {
			return nil, fmt.Errorf("audit export: read the tree for the consistency proofs: %w", err)
		}
	}
	var out []consistencyProof
	for _, n := range sizes {
		root, err := tlog.TreeHash(n, reader)
		if err != nil {
			return nil, fmt.Errorf("audit export: the tree of %d rows: %w", n, err)
		}
		proof, err := tlog.ProveTree(cp.Size, n, reader)
		if err != nil {
			return nil, fmt.Errorf("audit export: prove %d rows consistent with %d: %w", n, cp.Size, err)
		}
		out = append(out, consistencyProof{Size: n, Root: root.String(), Proof: joinHashes(proof)})
	}
	return out, nil
}

// prefetched reads, in one round trip, every stored hash the roots of and
// the proofs from sizes to size read. Which hashes tlog reads depends on
// the sizes alone, so a first pass over a reader that answers zeros learns
// them all.
func prefetched(reader tlog.HashReader, size int64, sizes []int64) (tlog.HashReader, error) {
	var asked indexRecorder
	for _, n := range sizes {
		if _, err := tlog.TreeHash(n, &asked); err != nil {
			return nil, err
		}
		if _, err := tlog.ProveTree(size, n, &asked); err != nil {
			return nil, err
		}
	}
	slices.Sort(asked)
	indexes := slices.Compact(asked)
	hashes, err := reader.ReadHashes(indexes)
	if err != nil {
		return nil, err
	}
	cache := make(hashCache, len(indexes))
	for i, idx := range indexes {
		cache[idx] = hashes[i]
	}
	return cache, nil
}

// indexRecorder is a tlog.HashReader that answers zero hashes and keeps
// the indexes it was asked for.
type indexRecorder []int64

func (r *indexRecorder) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	*r = append(*r, indexes...)
	return make([]tlog.Hash, len(indexes)), nil
}

// hashCache answers from hashes read before.
type hashCache map[int64]tlog.Hash

func (c hashCache) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := c[idx]
		if !ok {
			return nil, fmt.Errorf("audit tree: hash %d was not read ahead", idx)
		}
		out[i] = h
	}
	return out, nil
}

// joinHashes writes hashes as one base64 string, as proofs travel.
func joinHashes(hashes []tlog.Hash) string {
	raw := make([]byte, 0, len(hashes)*tlog.HashSize)
	for _, h := range hashes {
		raw = append(raw, h[:]...)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// splitHashes reads joinHashes' string.
func splitHashes(s string) ([]tlog.Hash, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%tlog.HashSize != 0 {
		return nil, false
	}
	out := make([]tlog.Hash, 0, len(raw)/tlog.HashSize)
	for i := 0; i < len(raw); i += tlog.HashSize {
		out = append(out, tlog.Hash(raw[i:i+tlog.HashSize]))
	}
	return out, true
}

// proveBatch is how many rows a prover hands to a worker at once.
const proveBatch = 512

// prover adds each row's inclusion proof and writes the rows in order. With
// parallel set (the tree is in memory, which any goroutine may read) the
// proofs of batches of rows are computed by workers, one per CPU, while
// the database sends the next rows: a proof is most of a row's cost.
type prover struct {
	size   int64
	reader tlog.HashReader
	// split, rightRoot, leftRoot and rest shortcut the proofs of a tree
	// whose size is not a power of two (see proveRecord); split is 0 until
	// settled and -1 when there is nothing to shortcut.
	split               int64
	rightRoot, leftRoot tlog.Hash
	rest                *prover
	w                   io.Writer
	parallel            bool

	batch   *proofBatch
	work    chan *proofBatch
	ordered chan *proofBatch
	written chan error
	workers sync.WaitGroup
}

type proofBatch struct {
	seqs []int64
	// text holds the batch's rows one after another; ends[i] is where row
	// i ends. One buffer, not one allocation a row.
	text []byte
	ends []int
	out  []byte
	err  error
	done chan struct{}
}

// lines returns the batch's rows.
func (b *proofBatch) lines() [][]byte {
	out := make([][]byte, len(b.ends))
	start := 0
	for i, end := range b.ends {
		out[i], start = b.text[start:end], end
	}
	return out
}

func newProver(ctx context.Context, size int64, reader tlog.HashReader, w io.Writer, parallel bool) *prover {
	p := &prover{size: size, reader: reader, w: w, parallel: parallel}
	if !parallel {
		// A few rows read their hashes from the database, where the
		// shortcut's own reads would cost more than it saves.
		p.split = -1
		return p
	}
	// The workers share the shortcut: it is settled before they start.
	if err := p.settle(); err != nil {
		p.split = -1
	}
	n := max(runtime.GOMAXPROCS(0), 1)
	p.work, p.ordered, p.written = make(chan *proofBatch, 2*n), make(chan *proofBatch, 2*n), make(chan error, 1)
	for range n {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for b := range p.work {
				b.out, b.err = p.prove(make([]byte, 0, len(b.text)+len(b.seqs)*p.proofSpace()), b.seqs, b.lines())
				close(b.done)
			}
		}()
	}
	go func() {
		var err error
		for b := range p.ordered {
			<-b.done
			if err == nil {
				if err = b.err; err == nil {
					_, err = w.Write(b.out)
				}
			}
		}
		p.written <- err
	}()
	return p
}

// add takes one row (its JSON without the closing brace); line is reused
// by the caller.
func (p *prover) add(seq int64, line []byte) error {
	if !p.parallel {
		out, err := p.prove(nil, []int64{seq}, [][]byte{line})
		if err != nil {
			return err
		}
		_, err = p.w.Write(out)
		return err
	}
	if p.batch == nil {
		p.batch = &proofBatch{done: make(chan struct{}), text: make([]byte, 0, proveBatch*(len(line)+64))}
	}
	p.batch.seqs = append(p.batch.seqs, seq)
	p.batch.text = append(p.batch.text, line...)
	p.batch.ends = append(p.batch.ends, len(p.batch.text))
	if len(p.batch.seqs) == proveBatch {
		p.send()
	}
	return nil
}

func (p *prover) send() {
	p.ordered <- p.batch
	p.work <- p.batch
	p.batch = nil
}

// finish writes what is left and returns the first error.
func (p *prover) finish() error {
	if !p.parallel {
		return nil
	}
	if p.batch != nil {
		p.send()
	}
	close(p.work)
	close(p.ordered)
	p.workers.Wait()
	return <-p.written
}

// abandon stops the workers after a failed read.
func (p *prover) abandon() { _ = p.finish() }

// proveRecord is tlog.ProveRecord(p.size, n, p.reader), faster. RFC 6962
// (2.1.1) defines the audit path of leaf n in a tree of size t, with k the
// largest power of two below t: for n < k, its path in the complete tree of
// the first k leaves, then the root of the rest; for n ≥ k, its path in the
// rest, then the root of the first k. tlog recomputes the rest's root for
// every proof; here it is computed once, the first k leaves' root is a
// stored hash, and the path in the rest is that of a tree of t-k leaves
// whose stored hashes are the real ones shifted by k, proved the same way.
func (p *prover) proveRecord(n int64) (tlog.RecordProof, error) {
	if err := p.settle(); err != nil {
		return nil, err
	}
	if p.split <= 0 {
		if p.size > 0 && p.size&(p.size-1) == 0 {
			return completePath(p.size, n, p.reader)
		}
		return tlog.ProveRecord(p.size, n, p.reader)
	}
	if n < p.split {
		left, err := completePath(p.split, n, p.reader)
		if err != nil {
			return nil, err
		}
		return append(left, p.rightRoot), nil
	}
	right, err := p.rest.proveRecord(n - p.split)
	if err != nil {
		return nil, err
	}
	return append(right, p.leftRoot), nil
}

// completePath is the audit path of leaf n in a complete tree of size
// leaves, size a power of two: at each level from the leaves up, the
// stored hash of the node beside n's ancestor (RFC 6962 2.1.1 with every
// split at the middle). It reads them in one call and hashes nothing.
func completePath(size, n int64, r tlog.HashReader) (tlog.RecordProof, error) {
	levels := bits.Len64(uint64(size)) - 1
	if direct, ok := r.(directTree); ok {
		proof := make(tlog.RecordProof, levels)
		for level := range levels {
			h, ok := direct.hashAt(tlog.StoredHashIndex(level, (n>>level)^1))
			if !ok {
				return nil, fmt.Errorf("audit tree: no stored hash for level %d beside leaf %d", level, n)
			}
			proof[level] = h
		}
		return proof, nil
	}
	indexes := make([]int64, levels)
	for level := range levels {
		indexes[level] = tlog.StoredHashIndex(level, (n>>level)^1)
	}
	hashes, err := r.ReadHashes(indexes)
	if err != nil {
		return nil, err
	}
	return tlog.RecordProof(hashes), nil
}

// directTree is a tree in memory, whose hashes a proof reads one by one
// without a slice for each read.
type directTree interface {
	hashAt(index int64) (tlog.Hash, bool)
}

func (m *memoryTree) hashAt(index int64) (tlog.Hash, bool) {
	if index < 0 || index >= int64(len(m.hashes)) {
		return tlog.Hash{}, false
	}
	return m.hashes[index], true
}

func (s shiftedTree) hashAt(index int64) (tlog.Hash, bool) {
	inner, ok := s.r.(directTree)
	if !ok {
		return tlog.Hash{}, false
	}
	level, m := tlog.SplitStoredHashIndex(index)
	return inner.hashAt(tlog.StoredHashIndex(level, m+s.by>>level))
}

// settle computes the split, the two roots and the prover of the rest
// once; the workers share them, so a parallel prover settles before they
// start.
func (p *prover) settle() error {
	if p.split != 0 {
		return nil
	}
	p.split = -1
	if p.size < 2 || p.size&(p.size-1) == 0 {
		return nil
	}
	k := int64(1) << (bits.Len64(uint64(p.size-1)) - 1)
	first, err := tlog.ProveRecord(p.size, 0, p.reader)
	if err != nil {
		return err
	}
	left, err := p.reader.ReadHashes([]int64{tlog.StoredHashIndex(bits.Len64(uint64(k))-1, 0)})
	if err != nil {
		return err
	}
	p.rest = &prover{size: p.size - k, reader: shiftedTree{r: p.reader, by: k}}
	if err := p.rest.settle(); err != nil {
		return err
	}
	p.split, p.rightRoot, p.leftRoot = k, first[len(first)-1], left[0]
	return nil
}

// shiftedTree reads the stored hashes of the leaves from by on as those of
// a tree of their own: its stored hash (level, m) is the real (level,
// m + by>>level). by is a power of two at least as large as any complete
// subtree read through it.
type shiftedTree struct {
	r  tlog.HashReader
	by int64
}

// ReadHashes implements tlog.HashReader.
func (s shiftedTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	stored := make([]int64, len(indexes))
	for i, idx := range indexes {
		level, m := tlog.SplitStoredHashIndex(idx)
		stored[i] = tlog.StoredHashIndex(level, m+s.by>>level)
	}
	return s.r.ReadHashes(stored)
}

// proofSpace is what a row's proof adds to it at most: the key and a
// base64 string of log2(size)+1 hashes.
func (p *prover) proofSpace() int {
	return 16 + base64.StdEncoding.EncodedLen(tlog.HashSize*(bits.Len64(uint64(p.size))+1))
}

// prove appends each row with its proof (for rows the checkpoint covers)
// and its closing brace to out.
func (p *prover) prove(out []byte, seqs []int64, lines [][]byte) ([]byte, error) {
	var concatenated []byte
	for i, seq := range seqs {
		out = append(out, lines[i]...)
		if seq <= p.size {
			proof, err := p.proveRecord(seq - 1)
			if err != nil {
				return out, fmt.Errorf("prove seq %d: %w", seq, err)
			}
			concatenated = concatenated[:0]
			for _, h := range proof {
				concatenated = append(concatenated, h[:]...)
			}
			out = append(out, `,"proof":"`...)
			out = base64.StdEncoding.AppendEncode(out, concatenated)
			out = append(out, '"')
		}
		out = append(out, "}\n"...)
	}
	return out, nil
}

func lastOr(s []int64, empty int64) int64 {
	if len(s) == 0 {
		return empty
	}
	return s[len(s)-1]
}

// loadStoredTree reads the stored hashes of a tree of size records into
// memory, in one streamed query.
func loadStoredTree(ctx context.Context, trail trailStore, size int64) (*memoryTree, error) {
	want := tlog.StoredHashCount(size)
	m := &memoryTree{hashes: make([]tlog.Hash, 0, want)}
	err := trail.TreeHashesBelow(ctx, want, func(idx int64, h []byte) error {
		if idx != int64(len(m.hashes)) || len(h) != tlog.HashSize {
			return fmt.Errorf("the stored tree lacks hash %d", len(m.hashes))
		}
		m.hashes = append(m.hashes, tlog.Hash(h))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if int64(len(m.hashes)) != want {
		return nil, fmt.Errorf("the stored tree holds %d hashes of the %d a tree of %d rows has", len(m.hashes), want, size)
	}
	return m, nil
}

// noteText returns the text of a signed note, unverified: the exporter
// passes the checkpoint on, and the reviewer checks its signature.
func noteText(msg []byte) (string, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return "", errors.New("not a signed note")
	}
	return string(msg[:i+1]), nil
}

// proofTail is how ExportEvidence ends a row that has a proof.
var proofTail = []byte(`,"proof":"`)

// decodeEvidenceRow reads one row. A row as ExportEvidence writes it ends
// with its proof, a base64 string, which is cut off and taken as it is, so
// that only the fields go through the strict JSON decoder; any other
// spelling of a row is decoded whole, as strictly.
func decodeEvidenceRow(b []byte, buf *[]byte) (evidenceRow, error) {
	var row evidenceRow
	var proof []byte
	if parseExportedRow(b, &row.fileRow, &proof) {
		if proof != nil {
			text := string(proof)
			row.Proof = &text
		}
		return row, nil
	}
	if i := bytes.LastIndex(b, proofTail); i > 0 && bytes.HasSuffix(b, []byte(`"}`)) {
		proof := b[i+len(proofTail) : len(b)-2]
		if bytes.IndexByte(proof, '"') < 0 && bytes.IndexByte(proof, '\\') < 0 {
			*buf = append(append((*buf)[:0], b[:i]...), '}')
			if err := decodeStrict(*buf, &row.fileRow); err == nil {
				text := string(proof)
				row.Proof = &text
				return row, nil
			}
		}
	}
	return decodeEvidenceRowStrictly(b)
}

// decodeEvidenceRowStrictly decodes a row of any spelling with
// encoding/json, refusing unknown fields.
func decodeEvidenceRowStrictly(b []byte) (evidenceRow, error) {
	var row evidenceRow
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&row); err != nil {
		return evidenceRow{}, err
	}
	if dec.More() {
		return evidenceRow{}, errors.New("more than one JSON value on the line")
	}
	return row, nil
}

// wholeTrailListed checks the list of a whole-trail export: every seq from
// 1 on, through the checkpoint's size, and through the export's own row
// when its filter names it.
func wholeTrailListed(name string, matched []int64, size, through int64) error {
	fail := func(seq int64, p Problem, format string, args ...any) error {
		return &ChainError{Seq: seq, Problem: p, Detail: fmt.Sprintf(format, args...), Verified: 0, Source: name}
	}
	for i, seq := range matched {
		if want := int64(i) + 1; seq != want {
			return fail(want, Gap, "a whole-trail export lists seq %d where seq %d belongs: %s missing from the export", seq, want, missingRows(want, seq-1))
		}
	}
	n := int64(len(matched))
	end := max(size, through)
	switch {
	case n < end:
		return fail(n+1, Gap, "a whole-trail export through seq %d lists rows 1–%d only: %s missing", end, n, missingRows(n+1, end))
	case through > 0 && n > through:
		return fail(through+1, Malformed, "a whole-trail export through seq %d lists %d rows", through, n)
	}
	return nil
}

// IsEvidence reports whether the file br begins with is an evidence export.
func IsEvidence(br *bufio.Reader) bool {
	b, _ := br.Peek(64)
	return bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n\xef\xbb\xbf"), []byte(`{"expiryctl_audit_evidence":`))
}

// VerifyEvidence verifies an evidence export read from r with no database:
// the checkpoint's signature against verifierKey; each consistency proof;
// each row's hash against its fields and the filter; each proof against
// the checkpoint's root; that the file holds exactly the rows its header
// lists; and, for a whole-trail export, that they are every row from seq 1
// and hash to the checkpoint's root. name is used in messages.
//
// It proves that every row it proved is, unchanged, in the trail the
// checkpoint's signer vouched for, and that a whole-trail export left none
// out. It cannot prove that a filter matched no other row: the list of
// matched rows is the exporter's word.
func VerifyEvidence(ctx context.Context, r io.Reader, name, verifierKey string) (EvidenceResult, error) {
	return verifyEvidence(ctx, r, name, verifierKey, nil)
}

// VerifyEvidenceExtends is VerifyEvidence for a reviewer who holds a
// checkpoint of their own, held: the file's checkpoint must extend it. An
// older one is a rollback (checkpoint-rollback); one of the same size must
// have its root; a newer one must carry a consistency proof from held's
// size, or, for a whole-trail file, hold the rows whose tree shows it.
func VerifyEvidenceExtends(ctx context.Context, r io.Reader, name, verifierKey string, held Checkpoint) (EvidenceResult, error) {
	return verifyEvidence(ctx, r, name, verifierKey, &held)
}

func verifyEvidence(ctx context.Context, r io.Reader, name, verifierKey string, held *Checkpoint) (EvidenceResult, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var lineBuf []byte
	fail := func(seq int64, p Problem, verified int64, format string, args ...any) *ChainError {
		return &ChainError{Seq: seq, Problem: p, Detail: fmt.Sprintf(format, args...), Verified: verified, Source: name}
	}
	first, err := readLine(br, &lineBuf)
	if err != nil && !errors.Is(err, io.EOF) {
		return EvidenceResult{}, fmt.Errorf("audit verify %s: %w", name, err)
	}
	var header evidenceHeader
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(first, "\xef\xbb\xbf")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&header); err != nil || header.Version != 1 {
		return EvidenceResult{}, fail(0, Malformed, 0, "line 1: not the header of an expiryctl evidence export (%v)", err)
	}
	cp, err := OpenCheckpoint([]byte(header.Checkpoint), verifierKey)
	var refused *ChainError
	if errors.As(err, &refused) {
		return EvidenceResult{}, fail(0, refused.Problem, 0, "the export's checkpoint: %s", refused.Detail)
	}
	if err != nil {
		return EvidenceResult{}, err
	}
	if cp.Origin != header.Origin {
		return EvidenceResult{}, fail(0, CheckpointOrigin, 0, "the header says trail %q, its checkpoint %q", header.Origin, cp.Origin)
	}
	res := EvidenceResult{Checkpoint: cp}
	for _, c := range header.Consistency {
		root, err := tlog.ParseHash(c.Root)
		proof, ok := splitHashes(c.Proof)
		if err != nil || !ok || c.Size <= 0 || c.Size >= cp.Size {
			return res, fail(0, Malformed, 0, "the header's consistency proof from %d rows is not a size below the checkpoint's %d, a root and whole hashes", c.Size, cp.Size)
		}
		if err := tlog.CheckTree(proof, cp.Size, cp.Root, c.Size, root); err != nil {
			return res, fail(0, CheckpointMismatch, 0, "the header's proof that the checkpoint of %d rows extends the tree of %d rows does not check: %v", cp.Size, c.Size, err)
		}
		res.Consistent = append(res.Consistent, c.Size)
	}
	claim, err := settledCount(header, cp, name)
	if err != nil {
		return res, err
	}
	// checkHeld is left set when only the rows can show that cp extends
	// held: a whole-trail file without a proof from held's size.
	var checkHeld bool
	if held != nil {
		if checkHeld, err = extendsHeld(header, cp, *held, name); err != nil {
			return res, err
		}
	}
	matched := header.Matched
	for i := 1; i < len(matched); i++ {
		if matched[i] <= matched[i-1] {
			return res, fail(matched[i], Malformed, 0, "the header's list of matched rows is not in ascending seq order")
		}
	}
	seen := make([]bool, len(matched))
	// An export whose filter keeps every row is the whole trail: it must
	// hold every seq from 1 through the checkpoint and on to its own end,
	// and it is proved as a whole, the tree of its rows computed here
	// having the checkpoint's root, at two hashes a row rather than a
	// proof's log n. A file that lists fewer rows is refused, not proved
	// row by row: a row taken out of it, and out of its list, is a gap.
	whole := header.Filter.IsZero()
	if whole {
		if err := wholeTrailListed(name, matched, cp.Size, header.Filter.ThroughSeq); err != nil {
			return res, err
		}
	}
	var tree *memoryTree
	var tally *tallyOnTheSide
	if whole {
		tree = &memoryTree{hashes: make([]tlog.Hash, 0, tlog.StoredHashCount(cp.Size))}
		if !cp.Counts.IsZero() {
			tally = newTallyOnTheSide(cp.Size)
			defer tally.finish()
		}
	}
	var inTree, newestProved int64
	var canonical, proofBuf, rowBuf []byte
	var proof tlog.RecordProof
	for line := 2; ; line++ {
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return res, err
			}
		}
		b, err := readLine(br, &lineBuf)
		if len(b) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return res, fmt.Errorf("audit verify %s: %w", name, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		row, err := decodeEvidenceRow(b, &rowBuf)
		if err != nil {
			return res, fail(0, Malformed, res.Rows, "line %d: not a row of an evidence export (%v)", line, err)
		}
		i := sort.Search(len(matched), func(i int) bool { return matched[i] >= row.Seq })
		switch {
		case i == len(matched) || matched[i] != row.Seq:
			return res, fail(row.Seq, Malformed, res.Rows, "line %d: seq %d is not among the rows the header lists", line, row.Seq)
		case seen[i]:
			return res, fail(row.Seq, DuplicateSeq, res.Rows, "line %d: seq %d is listed twice", line, row.Seq)
		}
		seen[i] = true
		at, err := parseExportTime(row.At)
		prevHash, err1 := hex.DecodeString(row.PrevHash)
		hash, err2 := hex.DecodeString(row.Hash)
		if err != nil || err1 != nil || err2 != nil || len(hash) != sha256.Size || len(prevHash) != sha256.Size {
			return res, fail(row.Seq, Malformed, res.Rows, "line %d: bad time or hashes", line)
		}
		canonical = appendCanonical(canonical[:0], row.Seq, at, row.Actor, row.DBRole, row.Action, row.Target, row.Details, row.Outcome, prevHash)
		if sum := sha256.Sum256(canonical); !bytes.Equal(sum[:], hash) {
			return res, fail(row.Seq, HashMismatch, res.Rows, "line %d: stored hash %x, computed %x: a field of the row was changed", line, hash, sum)
		}
		if !whole && !header.Filter.keeps(row.Seq, at, row.Actor, row.Action, row.Target) {
			return res, fail(row.Seq, Malformed, res.Rows, "line %d: seq %d does not match the export's filter", line, row.Seq)
		}
		res.Rows++
		if row.Seq > cp.Size {
			if row.Proof != nil {
				return res, fail(row.Seq, Malformed, res.Rows, "line %d: a proof for seq %d, newer than the checkpoint of %d rows", line, row.Seq, cp.Size)
			}
			continue
		}
		if whole {
			switch {
			case row.Seq > inTree+1:
				return res, fail(inTree+1, Gap, res.Rows-1, "line %d: seq %d comes where seq %d belongs: %s missing from the file", line, row.Seq, inTree+1,
					missingRows(inTree+1, row.Seq-1))
			case row.Seq != inTree+1:
				return res, fail(row.Seq, OutOfOrder, res.Rows-1, "line %d: seq %d comes where seq %d belongs", line, row.Seq, inTree+1)
			}
			if err := tree.add(inTree, hash); err != nil {
				return res, fmt.Errorf("audit verify %s: %w", name, err)
			}
			if tally != nil {
				sideAdd(tally, row.Seq, row.Action, row.Actor, row.Target)
			}
			inTree++
			// The root proves these rows; a proof the file carries all
			// the same is checked, so that no line of it goes unread.
			if row.Proof == nil {
				continue
			}
		}
		if row.Proof == nil {
			return res, fail(row.Seq, InclusionFailed, res.Rows-1, "line %d: seq %d carries no proof, though the checkpoint of %d rows covers it", line, row.Seq, cp.Size)
		}
		raw, err := base64.StdEncoding.AppendDecode(proofBuf[:0], []byte(*row.Proof))
		if err != nil || len(raw)%tlog.HashSize != 0 {
			return res, fail(row.Seq, Malformed, res.Rows, "line %d: the proof is not base64 of whole hashes", line)
		}
		proofBuf = raw
		proof = proof[:0]
		for i := 0; i < len(raw); i += tlog.HashSize {
			proof = append(proof, tlog.Hash(raw[i:i+tlog.HashSize]))
		}
		if err := tlog.CheckRecord(proof, cp.Size, cp.Root, row.Seq-1, tlog.RecordHash(hash)); err != nil {
			return res, fail(row.Seq, InclusionFailed, res.Rows-1,
				"line %d: seq %d is not in the trail the checkpoint of %d rows signed by %s vouches for: %v", line, row.Seq, cp.Size, cp.SignedBy(), err)
		}
		if !whole {
			res.Proved++
			newestProved = row.Seq
		}
	}
	for i, s := range matched {
		if !seen[i] {
			return res, fail(s, Gap, res.Rows, "seq %d is in the export's list of matched rows but not in the file: it was removed", s)
		}
	}
	if whole {
		root, err := tlog.TreeHash(cp.Size, tree)
		if err != nil {
			return res, fmt.Errorf("audit verify %s: %w", name, err)
		}
		if root != cp.Root {
			return res, fail(cp.Size, InclusionFailed, 0,
				"rows 1–%d hash to %s, the checkpoint signed by %s says %s: a row was changed, or comes from another trail "+
					"(`expiryctl audit verify --checkpoint` on the database names the first)", cp.Size, root, cp.SignedBy(), cp.Root)
		}
		res.Proved = cp.Size
		if tally != nil {
			counted, err := countTreeOf(tally.finish()).root()
			if err != nil {
				return res, fmt.Errorf("audit verify %s: %w", name, err)
			}
			if counted != cp.Counts {
				return res, fail(cp.Size, CheckpointMismatch, 0,
					"rows 1–%d, counted by action, actor and target, give a count tree with root %s; the checkpoint signed by %s says %s: "+
						"its signer counted other rows", cp.Size, counted.Root, cp.SignedBy(), cp.Counts.Root)
			}
		}
	}
	switch {
	case whole:
		res.Complete = true
	case claim != nil:
		if res.Proved != claim.Count || newestProved != claim.Newest {
			missing := claim.Count - res.Proved
			were := " were"
			if missing == 1 {
				were = " was"
			}
			withheld := plural(missing, "row") + were + " withheld from the file and its list"
			var seq int64
			if newestProved < claim.Newest {
				seq, withheld = claim.Newest, fmt.Sprintf("row %d, the newest, is not in it: %s", claim.Newest, withheld)
			}
			return res, fail(seq, Incomplete, res.Proved,
				"the checkpoint signed by %s counts %s of %s %q up to seq %d, the newest at seq %d; the file proves %d, the newest at seq %d: %s",
				cp.SignedBy(), plural(claim.Count, "row"), claim.Field, claim.Value, cp.Size, claim.Newest, res.Proved, newestProved, withheld)
		}
		res.Complete, res.Count = true, claim
	case cp.Counts.IsZero():
		res.Unproven = "its checkpoint carries no count tree (signed by a release before it): each row is proved, not that none was left out"
	default:
		res.Unproven = "its filter is not one the count tree settles (exactly one of action, actor and target, and no time window): " +
			"each row is proved, not that none was left out"
	}
	if checkHeld {
		root, err := tlog.TreeHash(held.Size, tree)
		if err != nil {
			return res, fmt.Errorf("audit verify %s: %w", name, err)
		}
		if root != held.Root {
			return res, fail(held.Size, CheckpointMismatch, 0,
				"rows 1–%d hash to %s, your checkpoint of %d rows says %s: the trail was rewritten since you took it", held.Size, root, held.Size, held.Root)
		}
	}
	if held != nil {
		res.Extends = held.Size
	}
	return res, nil
}

// settledCount checks the header's count proofs and returns what they
// settle of its filter; nil when the filter is not one a count tree
// settles, or the checkpoint carries none. A filter the checkpoint's count
// tree settles must carry them: proofs left out would hide rows left out.
func settledCount(header evidenceHeader, cp Checkpoint, name string) (*CountClaim, error) {
	fail := func(p Problem, format string, args ...any) (*CountClaim, error) {
		return nil, &ChainError{Problem: p, Detail: fmt.Sprintf(format, args...), Source: name}
	}
	field, value, settled := countFilter(header.Filter)
	switch {
	case header.Counts != nil && !settled:
		return fail(Malformed, "the header carries count proofs for a filter no count tree settles")
	case header.Counts != nil && cp.Counts.IsZero():
		return fail(Malformed, "the header carries count proofs, and its checkpoint signs no count tree")
	case header.Counts != nil:
		claim, err := checkCountProof(cp.Counts, field, value, header.Counts)
		if err != nil {
			return fail(Incomplete, "the header's count proof for %s %q: %v", field, value, err)
		}
		return &claim, nil
	case settled && !cp.Counts.IsZero():
		return fail(Incomplete, "the header carries no count proof for %s %q, though its checkpoint signs a count tree: "+
			"it was taken out, and rows with it may have been", field, value)
	}
	return nil, nil
}

// extendsHeld checks what the header alone can tell of whether cp extends
// the reviewer's checkpoint held. It reports whether the rows must still
// show it: a whole-trail file without a proof from held's size.
func extendsHeld(header evidenceHeader, cp, held Checkpoint, name string) (bool, error) {
	fail := func(p Problem, format string, args ...any) (bool, error) {
		return false, &ChainError{Problem: p, Detail: fmt.Sprintf(format, args...), Source: name}
	}
	switch {
	case held.Origin != cp.Origin:
		return fail(CheckpointOrigin, "your checkpoint is of trail %q, the export's of %q", held.Origin, cp.Origin)
	case cp.Size < held.Size:
		return fail(CheckpointRollback, "the export's checkpoint covers %d rows, yours %d: it was made from a trail rolled back, "+
			"or with the newer checkpoints withheld", cp.Size, held.Size)
	case cp.Size == held.Size && cp.Root != held.Root:
		return fail(CheckpointMismatch, "the export's checkpoint and yours both cover %d rows, with roots %s and %s: two versions of the trail were signed",
			cp.Size, cp.Root, held.Root)
	case cp.Size == held.Size || held.Size == 0:
		return false, nil
	}
	for _, c := range header.Consistency {
		if c.Size != held.Size {
			continue
		}
		if c.Root != held.Root.String() {
			return fail(CheckpointMismatch, "the export proves its checkpoint extends a tree of %d rows with root %s, yours has root %s: "+
				"the trail was rewritten since you took it", held.Size, c.Root, held.Root)
		}
		return false, nil // its proof was checked with the others
	}
	if header.Filter.IsZero() {
		return true, nil
	}
	return fail(ConsistencyUnproven, "the export carries no proof that its checkpoint of %d rows extends yours of %d: "+
		"ask for one made with `audit export --from-checkpoint YOURS`", cp.Size, held.Size)
}
