package audit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// The count tree is what makes a filtered export provably complete. An
// inclusion proof shows that a row is in the signed trail, never that no
// other row matches the filter; so a checkpoint also signs, for each value
// of each filterable field (action, actor, target), how many of its first
// rows hold that value and the newest seq among them. Each such leaf falls
// in one of 65536 buckets by the first two bytes of SHA-256 of its key; a
// bucket, its leaves in order, is one record of an RFC 6962 tree of 65536
// records, hashed as tlog hashes the trail's. A filtered export on one
// field carries the whole bucket of its value with the bucket's inclusion
// proof: the value's leaf says how many rows it must prove, and a value
// the bucket does not hold has none. docs/audit.md specifies the bytes.
//
// The database keeps the tree (audit_count_leaves, audit_count_tree) and
// extends it from its own rows (audit_counts_extend) in the transaction
// that records a checkpoint; the signer computes the same root from the
// rows on its own (signer.go), and the database keeps the checkpoint only
// when both agree.

// CountFields are the fields the count tree counts, in the tree's order.
var CountFields = []string{"action", "actor", "target"}

// countBuckets is the number of buckets, the count tree's records; bucket
// numbers are two bytes.
const countBuckets = 1 << 16

// countLevels is the count tree's height: level 0 the buckets, the root at
// countLevels.
const countLevels = 16

// CountsHead is a count tree's head, as a checkpoint signs it on its
// fourth line: `counts 65536 ROOT`. Buckets is zero in a checkpoint that
// carries none (signed by a release before the count tree).
type CountsHead struct {
	Buckets int64
	Root    tlog.Hash
}

// IsZero reports whether the checkpoint carries no count tree.
func (c CountsHead) IsZero() bool { return c.Buckets == 0 }

// countsLinePrefix starts the checkpoint's count-tree line.
const countsLinePrefix = "counts "

func (c CountsHead) line() string {
	return countsLinePrefix + strconv.FormatInt(c.Buckets, 10) + " " + c.Root.String() + "\n"
}

// parseCountsLine reads a `counts 65536 ROOT` line; ok is false for a
// line of another extension.
func parseCountsLine(line string) (head CountsHead, ok bool, err error) {
	rest, found := strings.CutPrefix(line, countsLinePrefix)
	if !found {
		return CountsHead{}, false, nil
	}
	buckets, root, found := strings.Cut(rest, " ")
	if !found || buckets != strconv.Itoa(countBuckets) {
		return CountsHead{}, true, fmt.Errorf("not a checkpoint: count tree line %q (want `counts %d ROOT`)", line, countBuckets)
	}
	h, err := tlog.ParseHash(root)
	if err != nil {
		return CountsHead{}, true, fmt.Errorf("not a checkpoint: count tree root %q", root)
	}
	return CountsHead{Buckets: countBuckets, Root: h}, true, nil
}

// CountLeaf is one leaf of the count tree: Count of the rows counted hold
// Value in Field, the newest of them at seq Newest.
type CountLeaf struct {
	Field  string `json:"field"`
	Value  string `json:"value"`
	Count  int64  `json:"count"`
	Newest int64  `json:"newest"`
}

// appendCountKey appends a leaf's key: the field's name and the value,
// each as its byte length (4 bytes, big-endian) and its bytes.
func appendCountKey(b []byte, field, value string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(field)))
	b = append(b, field...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// appendData appends the leaf's bytes: its key, then its count and newest
// seq, 8 bytes each, big-endian.
func (l CountLeaf) appendData(b []byte) []byte {
	b = appendCountKey(b, l.Field, l.Value)
	b = binary.BigEndian.AppendUint64(b, uint64(l.Count))
	return binary.BigEndian.AppendUint64(b, uint64(l.Newest))
}

// bucketOf is the bucket of a field's value: the first two bytes of
// SHA-256 of its key.
func bucketOf(field, value string) int {
	sum := sha256.Sum256(appendCountKey(nil, field, value))
	return int(binary.BigEndian.Uint16(sum[:2]))
}

// compareLeaves orders a bucket's leaves: by field, then by value, byte by
// byte.
func compareLeaves(a, b CountLeaf) int {
	return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Value, b.Value))
}

// bucketHash is the record hash of a bucket holding leaves, which must be
// in order: SHA-256 of 0x00 and the leaves' bytes one after another (an
// empty bucket is SHA-256 of 0x00 alone).
func bucketHash(leaves []CountLeaf) tlog.Hash {
	var data []byte
	for _, l := range leaves {
		data = l.appendData(data)
	}
	return tlog.RecordHash(data)
}

// emptyCountHash[level] is the hash of a subtree of the count tree under
// which no leaf falls.
var emptyCountHash = func() (h [countLevels + 1]tlog.Hash) {
	h[0] = tlog.RecordHash(nil)
	for level := 1; level <= countLevels; level++ {
		h[level] = tlog.NodeHash(h[level-1], h[level-1])
	}
	return h
}()

// countNode names a node of the count tree: level 0 the buckets.
type countNode struct{ level, n int }

// countTree is the count tree, whole or in part. A whole tree (complete)
// holds every leaf and a node it has no hash for is empty; a partial one,
// read from the database for the buckets a signer or an exporter needs,
// holds those buckets' leaves and the hashes beside their paths, and knows
// nothing else. A whole tree built from a tally reads its buckets' leaves
// from the tally as they are needed (fromTally).
type countTree struct {
	buckets   map[int][]CountLeaf
	nodes     map[countNode]tlog.Hash
	complete  bool
	fromTally *bucketedTally
}

func newCountTree(complete bool) *countTree {
	return &countTree{buckets: map[int][]CountLeaf{}, nodes: map[countNode]tlog.Hash{}, complete: complete}
}

// bucketedTally is a settled tally's entries by bucket: bucket b's are
// named[namedStart[b]:namedStart[b+1]] (actions and actors, in order) then
// the tally's targets[targetStart[b]:targetStart[b+1]] (in order of value).
type bucketedTally struct {
	tally                   *countTally
	named                   []tallyEntry
	namedStart, targetStart [countBuckets + 1]int32
}

// in calls fn with bucket b's entries, in the count tree's order: by
// field, action and actor before target, then by value.
func (bt *bucketedTally) in(b int, fn func(*tallyEntry)) {
	for i := bt.namedStart[b]; i < bt.namedStart[b+1]; i++ {
		fn(&bt.named[i])
	}
	for i := bt.targetStart[b]; i < bt.targetStart[b+1]; i++ {
		fn(&bt.tally.targets[i])
	}
}

// countTreeOf builds the whole tree of a tally. Its targets, settled, are
// already in bucket order; each bucket is hashed straight from the
// tally's bytes, a share of the buckets on each CPU.
func countTreeOf(t *countTally) *countTree {
	t.settle()
	bt := &bucketedTally{tally: t, named: slices.Clone(t.named)}
	slices.SortFunc(bt.named, func(a, b tallyEntry) int { return cmp.Or(cmp.Compare(a.bucket, b.bucket), t.compare(&a, &b)) })
	for _, e := range bt.named {
		bt.namedStart[int(e.bucket)+1]++
	}
	for _, e := range t.targets {
		bt.targetStart[int(e.bucket)+1]++
	}
	for b := range countBuckets {
		bt.namedStart[b+1] += bt.namedStart[b]
		bt.targetStart[b+1] += bt.targetStart[b]
	}
	hashes := make([]tlog.Hash, countBuckets)
	workers := max(runtime.GOMAXPROCS(0), 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var data []byte
			for b := w * countBuckets / workers; b < (w+1)*countBuckets/workers; b++ {
				data = data[:0]
				bt.in(b, func(e *tallyEntry) { data = t.appendData(data, e) })
				if len(data) > 0 {
					hashes[b] = tlog.RecordHash(data)
				}
			}
		}()
	}
	wg.Wait()
	tree := newCountTree(true)
	tree.fromTally = bt
	var dirty []int
	for b := range countBuckets {
		if bt.namedStart[b] < bt.namedStart[b+1] || bt.targetStart[b] < bt.targetStart[b+1] {
			tree.nodes[countNode{0, b}] = hashes[b]
			dirty = append(dirty, b)
		}
	}
	_ = tree.rehashAbove(dirty) // a whole tree has every node it reads
	return tree
}

// leavesOf returns bucket b's leaves, and whether the tree knows them.
func (t *countTree) leavesOf(b int) ([]CountLeaf, bool) {
	if leaves, ok := t.buckets[b]; ok {
		return leaves, true
	}
	if t.fromTally != nil {
		var leaves []CountLeaf
		t.fromTally.in(b, func(e *tallyEntry) { leaves = append(leaves, t.fromTally.tally.leaf(e)) })
		return leaves, true
	}
	return nil, t.complete
}

// node is the hash of node (level, n).
func (t *countTree) node(level, n int) (tlog.Hash, error) {
	if h, ok := t.nodes[countNode{level, n}]; ok {
		return h, nil
	}
	if t.complete {
		return emptyCountHash[level], nil
	}
	return tlog.Hash{}, fmt.Errorf("count tree: node %d at level %d was not read", n, level)
}

// root is the tree's root, as a checkpoint signs it.
func (t *countTree) root() (CountsHead, error) {
	h, err := t.node(countLevels, 0)
	return CountsHead{Buckets: countBuckets, Root: h}, err
}

// add counts n more rows of a field's value, the newest of them at seq
// newest, in its bucket, which the tree must hold; it returns the bucket.
func (t *countTree) add(field, value string, n, newest int64) (int, error) {
	b := bucketOf(field, value)
	leaves, ok := t.leavesOf(b)
	if !ok {
		return b, fmt.Errorf("count tree: bucket %d was not read", b)
	}
	l := CountLeaf{Field: field, Value: value}
	i, found := slices.BinarySearchFunc(leaves, l, compareLeaves)
	if !found {
		leaves = slices.Insert(leaves, i, l)
	}
	leaves[i].Count += n
	leaves[i].Newest = max(leaves[i].Newest, newest)
	t.buckets[b] = leaves
	return b, nil
}

// rehash recomputes the hashes of the buckets dirty and of every node
// above them.
func (t *countTree) rehash(dirty []int) error {
	for _, b := range dirty {
		leaves, _ := t.leavesOf(b)
		t.nodes[countNode{0, b}] = bucketHash(leaves)
	}
	return t.rehashAbove(dirty)
}

// rehashAbove recomputes every node above the buckets dirty.
func (t *countTree) rehashAbove(dirty []int) error {
	for level := 1; level <= countLevels; level++ {
		parents := make([]int, 0, len(dirty))
		for _, n := range dirty {
			parents = append(parents, n>>1)
		}
		slices.Sort(parents)
		dirty = slices.Compact(parents)
		for _, p := range dirty {
			left, err := t.node(level-1, 2*p)
			if err != nil {
				return err
			}
			right, err := t.node(level-1, 2*p+1)
			if err != nil {
				return err
			}
			t.nodes[countNode{level, p}] = tlog.NodeHash(left, right)
		}
	}
	return nil
}

// siblings lists, for each of buckets, the nodes beside its path to the
// root: what a partial tree reads besides the buckets themselves.
func siblings(buckets []int) []countNode {
	var out []countNode
	for _, b := range buckets {
		for level := range countLevels {
			out = append(out, countNode{level, (b >> level) ^ 1})
		}
	}
	return out
}

// prove returns the bucket of a field's value with its inclusion proof.
func (t *countTree) prove(field, value string) (*countProof, error) {
	b := bucketOf(field, value)
	leaves, ok := t.leavesOf(b)
	if !ok {
		return nil, fmt.Errorf("count tree: bucket %d was not read", b)
	}
	proof := make([]tlog.Hash, countLevels)
	for level := range countLevels {
		h, err := t.node(level, (b>>level)^1)
		if err != nil {
			return nil, err
		}
		proof[level] = h
	}
	return &countProof{Bucket: b, Leaves: append([]CountLeaf{}, leaves...), Proof: joinHashes(proof)}, nil
}

// countTally counts rows by field and value as they come, for the count
// tree of the rows added so far. Actions and actors are few and come on
// every row: each is found by its text in a small map. Targets may number
// as many as the rows: each row's target is appended as it comes, with
// its bucket, and they are settled (sorted by bucket and value, equal ones
// merged) when the tree is built, or when enough have come. Nothing the
// tally holds is a pointer the garbage collector must follow, and a trail
// of a million distinct targets costs a sort, not a million map entries.
type countTally struct {
	// named are the actions' and actors' entries, seen their indexes by
	// field and text; their text is in namedText.
	named     []tallyEntry
	namedText []byte
	seen      [2]map[string]int32
	// targets are settled: one entry a target, in order of bucket and
	// value; pending have come since, one a row. Their text is in
	// targetText.
	targets, pending []tallyEntry
	targetText       []byte
	settleAt         int
	key              []byte
}

// tallyEntry is one field's value.
type tallyEntry struct {
	field         uint8 // index in CountFields
	bucket        uint16
	start, end    uint32
	count, newest int64
}

// targetField is the index of target in CountFields.
const targetField = 2

// minSettle is how many pending targets a tally lets come before it
// settles them, at the least.
const minSettle = 1 << 20

// newCountTally returns an empty tally; rows, how many rows it will
// count, lets it make room for them ahead, up to a bound.
func newCountTally(rows int64) *countTally {
	hint := int(min(max(rows, 0), minSettle))
	return &countTally{seen: [2]map[string]int32{{}, {}}, pending: make([]tallyEntry, 0, hint), targetText: make([]byte, 0, 24*hint),
		settleAt: minSettle}
}

// add3 counts one row.
func add3[S ~string | ~[]byte](t *countTally, seq int64, action, actor, target S) {
	t.count(0, []byte(action), 1, seq)
	t.count(1, []byte(actor), 1, seq)
	t.count(targetField, []byte(target), 1, seq)
}

// count adds n rows holding value in field CountFields[field], the
// newest at seq newest.
func (t *countTally) count(field uint8, value []byte, n, newest int64) {
	if field != targetField {
		if i, ok := t.seen[field][string(value)]; ok {
			e := &t.named[i]
			e.count += n
			e.newest = max(e.newest, newest)
			return
		}
		t.seen[field][string(value)] = int32(len(t.named))
		start := len(t.namedText)
		t.namedText = append(t.namedText, value...)
		t.named = append(t.named, tallyEntry{field: field, bucket: t.bucket(field, value), start: uint32(start), end: uint32(len(t.namedText)),
			count: n, newest: newest})
		return
	}
	start := len(t.targetText)
	t.targetText = append(t.targetText, value...)
	t.pending = append(t.pending, tallyEntry{field: field, bucket: t.bucket(field, value), start: uint32(start), end: uint32(len(t.targetText)),
		count: n, newest: newest})
	if len(t.pending) >= t.settleAt {
		t.settle()
		t.settleAt = max(minSettle, 2*len(t.targets))
	}
}

// bucket is the bucket of a field's value.
func (t *countTally) bucket(field uint8, value []byte) uint16 {
	name := CountFields[field]
	t.key = binary.BigEndian.AppendUint32(t.key[:0], uint32(len(name)))
	t.key = append(t.key, name...)
	t.key = binary.BigEndian.AppendUint32(t.key, uint32(len(value)))
	t.key = append(t.key, value...)
	sum := sha256.Sum256(t.key)
	return binary.BigEndian.Uint16(sum[:2])
}

// settle merges the pending targets into the settled ones: the pending
// put in bucket order (one counting pass) and sorted by value within a
// bucket, then merged with the settled, equal values made one entry,
// their text copied into a new, compact buffer.
func (t *countTally) settle() {
	if len(t.pending) == 0 {
		return
	}
	pending := t.pending
	var start [countBuckets + 1]int32
	for _, e := range pending {
		start[int(e.bucket)+1]++
	}
	for b := range countBuckets {
		start[b+1] += start[b]
	}
	order := make([]int32, len(pending))
	next := start
	for i, e := range pending {
		order[next[e.bucket]] = int32(i)
		next[e.bucket]++
	}
	merged := make([]tallyEntry, 0, len(t.targets)+len(pending))
	text := make([]byte, 0, len(t.targetText))
	emit := func(e tallyEntry) {
		value := t.value(&e)
		if n := len(merged); n > 0 && merged[n-1].bucket == e.bucket && bytes.Equal(text[merged[n-1].start:merged[n-1].end], value) {
			last := &merged[n-1]
			last.count += e.count
			last.newest = max(last.newest, e.newest)
			return
		}
		s := len(text)
		text = append(text, value...)
		e.start, e.end = uint32(s), uint32(len(text))
		merged = append(merged, e)
	}
	settled := t.targets
	for b := range countBuckets {
		in := order[start[b]:start[b+1]]
		if len(in) > 1 {
			slices.SortFunc(in, func(i, j int32) int { return bytes.Compare(t.value(&pending[i]), t.value(&pending[j])) })
		}
		for len(in) > 0 || len(settled) > 0 && int(settled[0].bucket) == b {
			switch {
			case len(settled) == 0 || int(settled[0].bucket) != b:
				emit(pending[in[0]])
				in = in[1:]
			case len(in) == 0 || bytes.Compare(t.value(&settled[0]), t.value(&pending[in[0]])) <= 0:
				emit(settled[0])
				settled = settled[1:]
			default:
				emit(pending[in[0]])
				in = in[1:]
			}
		}
	}
	t.targets, t.pending, t.targetText = merged, t.pending[:0], text
}

// put sets a leaf read from elsewhere.
func (t *countTally) put(l CountLeaf) error {
	i := slices.Index(CountFields, l.Field)
	if i < 0 {
		return fmt.Errorf("the count tree has no field %q", l.Field)
	}
	t.count(uint8(i), []byte(l.Value), l.Count, l.Newest)
	return nil
}

func (t *countTally) value(e *tallyEntry) []byte {
	if e.field == targetField {
		return t.targetText[e.start:e.end]
	}
	return t.namedText[e.start:e.end]
}

func (t *countTally) leaf(e *tallyEntry) CountLeaf {
	return CountLeaf{Field: CountFields[e.field], Value: string(t.value(e)), Count: e.count, Newest: e.newest}
}

// compare orders two entries as the count tree does: by field name, then
// by value.
func (t *countTally) compare(a, b *tallyEntry) int {
	return cmp.Or(strings.Compare(CountFields[a.field], CountFields[b.field]), bytes.Compare(t.value(a), t.value(b)))
}

// appendData appends an entry's leaf bytes, as CountLeaf.appendData does.
func (t *countTally) appendData(b []byte, e *tallyEntry) []byte {
	name, value := CountFields[e.field], t.value(e)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, value...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.count))
	return binary.BigEndian.AppendUint64(b, uint64(e.newest))
}

// leaves returns the tally's leaves, in no particular order.
func (t *countTally) leaves() []CountLeaf {
	t.settle()
	out := make([]CountLeaf, 0, len(t.named)+len(t.targets))
	for _, entries := range [][]tallyEntry{t.named, t.targets} {
		for i := range entries {
			out = append(out, t.leaf(&entries[i]))
		}
	}
	return out
}

// countProof is a bucket of the count tree with its inclusion proof, as
// an evidence header carries it.
type countProof struct {
	Bucket int         `json:"bucket"`
	Leaves []CountLeaf `json:"leaves"`
	Proof  string      `json:"proof"`
}

// CountClaim is what a count tree settles of one field's value: how many
// of the checkpoint's rows hold it, and the newest of them (0 and 0 for a
// value no row holds).
type CountClaim struct {
	Field, Value  string
	Count, Newest int64
}

// checkCountProof checks a bucket and its proof against the count tree
// head, and returns what it settles of value in field: the count of its
// leaf, or none when the bucket, which holds every leaf of its bucket,
// holds none for it.
func checkCountProof(head CountsHead, field, value string, p *countProof) (CountClaim, error) {
	claim := CountClaim{Field: field, Value: value}
	if want := bucketOf(field, value); p.Bucket != want {
		return claim, fmt.Errorf("it is bucket %d, and %s %q falls in bucket %d", p.Bucket, field, value, want)
	}
	for i, l := range p.Leaves {
		switch {
		case bucketOf(l.Field, l.Value) != p.Bucket:
			return claim, fmt.Errorf("its leaf %s %q falls in another bucket", l.Field, l.Value)
		case i > 0 && compareLeaves(p.Leaves[i-1], l) >= 0:
			return claim, errors.New("its leaves are not in order of field and value")
		case l.Count < 1 || l.Newest < 1:
			return claim, fmt.Errorf("its leaf %s %q counts %d rows, the newest at seq %d", l.Field, l.Value, l.Count, l.Newest)
		}
	}
	proof, ok := splitHashes(p.Proof)
	if !ok {
		return claim, errors.New("its proof is not base64 of whole hashes")
	}
	if err := tlog.CheckRecord(proof, head.Buckets, head.Root, int64(p.Bucket), bucketHash(p.Leaves)); err != nil {
		return claim, fmt.Errorf("bucket %d is not the one the checkpoint's count tree holds: %w", p.Bucket, err)
	}
	if i, found := slices.BinarySearchFunc(p.Leaves, CountLeaf{Field: field, Value: value}, compareLeaves); found {
		claim.Count, claim.Newest = p.Leaves[i].Count, p.Leaves[i].Newest
	}
	return claim, nil
}

// countFilter returns the field and value of a filter that the count tree
// settles: exactly one of action, actor and target, and no time window.
// ok is false for any other filter.
func countFilter(f Filter) (field, value string, ok bool) {
	if !f.Since.IsZero() || !f.Until.IsZero() {
		return "", "", false
	}
	n := 0
	for _, fv := range [][2]string{{"action", f.Action}, {"actor", f.Actor}, {"target", f.Target}} {
		if fv[1] != "" {
			field, value = fv[0], fv[1]
			n++
		}
	}
	return field, value, n == 1
}

// readCountTree reads from the stored count tree the buckets given and the
// hashes beside their paths to the root: a partial tree whose root is the
// stored tree's if the database kept it faithfully, which the caller
// checks against a signed root. The hashes of the buckets and of the nodes
// above them are computed here from the leaves, not read.
func readCountTree(ctx context.Context, trail trailStore, buckets []int) (*countTree, error) {
	tree := newCountTree(false)
	buckets = slices.Compact(slices.Sorted(slices.Values(buckets)))
	for _, b := range buckets {
		tree.buckets[b] = nil
	}
	if err := trail.CountLeaves(ctx, buckets, func(b int, l CountLeaf) error {
		tree.buckets[b] = append(tree.buckets[b], l)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the count tree: %w", err)
	}
	for _, leaves := range tree.buckets {
		slices.SortFunc(leaves, compareLeaves)
	}
	beside := siblings(buckets)
	for _, n := range beside {
		tree.nodes[n] = emptyCountHash[n.level]
	}
	if err := trail.CountNodes(ctx, beside, func(n countNode, h []byte) error {
		if len(h) != tlog.HashSize {
			return fmt.Errorf("count tree: node %d at level %d is %d bytes", n.n, n.level, len(h))
		}
		tree.nodes[n] = tlog.Hash(h)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the count tree: %w", err)
	}
	return tree, tree.rehash(buckets)
}

// tallyBatchRows is how many rows a tallyOnTheSide hands over at once.
const tallyBatchRows = 4096

// tallyOnTheSide counts rows into a tally on a goroutine of its own, so
// that a verifier reading and hashing a trail on one core counts it on
// another: counting a million distinct targets costs about what reading
// them does.
type tallyOnTheSide struct {
	tally *countTally
	full  chan *rowBatch
	empty chan *rowBatch
	done  chan struct{}
	batch *rowBatch
}

// rowBatch holds rows' seq and their action, actor and target bytes, one
// after another in text; ends[i] are where row i's three end.
type rowBatch struct {
	seqs []int64
	text []byte
	ends [][3]int
}

func newTallyOnTheSide(rows int64) *tallyOnTheSide {
	s := &tallyOnTheSide{tally: newCountTally(rows), full: make(chan *rowBatch, 2), empty: make(chan *rowBatch, 3), done: make(chan struct{})}
	for range 3 {
		s.empty <- &rowBatch{}
	}
	full := s.full
	go func() {
		defer close(s.done)
		for b := range full {
			start := 0
			for i, seq := range b.seqs {
				e := b.ends[i]
				add3(s.tally, seq, b.text[start:e[0]], b.text[e[0]:e[1]], b.text[e[1]:e[2]])
				start = e[2]
			}
			b.seqs, b.text, b.ends = b.seqs[:0], b.text[:0], b.ends[:0]
			s.empty <- b
		}
	}()
	return s
}

// sideAdd counts one row; the values are copied, so the caller may reuse
// them at once.
func sideAdd[S ~string | ~[]byte](s *tallyOnTheSide, seq int64, action, actor, target S) {
	if s.batch == nil {
		s.batch = <-s.empty
	}
	b := s.batch
	b.seqs = append(b.seqs, seq)
	b.text = append(b.text, action...)
	a := len(b.text)
	b.text = append(b.text, actor...)
	c := len(b.text)
	b.text = append(b.text, target...)
	b.ends = append(b.ends, [3]int{a, c, len(b.text)})
	if len(b.seqs) == tallyBatchRows {
		s.full <- b
		s.batch = nil
	}
}

// finish waits for every row to be counted and returns the tally; called
// again, it returns the tally at once.
func (s *tallyOnTheSide) finish() *countTally {
	if s.full == nil {
		return s.tally
	}
	if s.batch != nil && len(s.batch.seqs) > 0 {
		s.full <- s.batch
	}
	s.batch = nil
	close(s.full)
	s.full = nil
	<-s.done
	return s.tally
}
