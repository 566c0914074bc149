package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/store"
)

// checkpointSigner signs checkpoints with one key, and vouches only for
// what it checked itself. The database computes the tree and the count
// tree and could lie about them, or hide rows from the signer's login (a
// row-level security policy does it), so the signer recomputes both from
// the rows: from the newest checkpoint it signed before, after checking
// that the database's stored trees still agree with that checkpoint, or,
// with none, from the first row. A long-lived signer keeps what it signed
// last, and reads only the rows written since and the count tree's
// buckets they fall in.
type checkpointSigner struct {
	signer   note.Signer
	verifier note.Verifier
	actor    string
	last     *signedState
}

// signedState is what a signer knows of a tree it signed or checked: its
// head (with the count tree's), the hash of its last row, and the stored
// hashes the tree is made of (all that extending it reads).
type signedState struct {
	head     TreeHead
	lastHash Hash
	edge     hashCache
}

// baseSearch bounds the stored checkpoints a signer looks through for the
// newest of its own.
const baseSearch = 256

func newCheckpointSigner(signerKey, actor string) (*checkpointSigner, error) {
	key := strings.TrimSpace(signerKey)
	signer, err := note.NewSigner(key)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint key: %w (it must be a key written by `expiryctl audit keygen`)", err)
	}
	vkey, err := verifierKeyOf(key)
	if err != nil {
		return nil, err
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint key: %w", err)
	}
	return &checkpointSigner{signer: signer, verifier: verifier, actor: actor}, nil
}

// verifierKeyOf derives the verifier key of a signed-note Ed25519 signing
// key (PRIVATE+KEY+name+hash+base64 of 0x01 and the seed), so that a
// signer recognises the checkpoints it signed before.
func verifierKeyOf(signerKey string) (string, error) {
	parts := strings.SplitN(signerKey, "+", 5)
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", errors.New("read the checkpoint key: not a signing key written by `expiryctl audit keygen`")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return "", errors.New("read the checkpoint key: not an Ed25519 signing key written by `expiryctl audit keygen`")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	return note.NewEd25519VerifierKey(parts[2], pub)
}

// sign extends the tree to the trail's end, checks it and counts its rows
// from the last tree this signer vouched for, signs its head and the count
// tree's, and stores the checkpoint.
func (s *checkpointSigner) sign(ctx context.Context, pool *pgxpool.Pool) (Checkpoint, error) {
	head, err := ExtendTree(ctx, pool)
	if err != nil {
		return Checkpoint{}, err
	}
	if head.Size == 0 {
		return Checkpoint{}, ErrEmptyTrail
	}
	trail := newPostgresTrail(pool)
	var next *signedState
	err = trail.Snapshot(ctx, func(snap trailStore) error {
		base, err := s.base(ctx, snap, head.Size)
		if err != nil {
			return err
		}
		next, err = extendChecked(ctx, snap, base, head)
		return err
	})
	if err != nil {
		return Checkpoint{}, mayNotRead(ctx, pool, err)
	}
	msg, err := note.Sign(&note.Note{Text: checkpointText(next.head)}, s.signer)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("sign the checkpoint: %w", err)
	}
	// The database counts the same rows in the transaction that keeps the
	// checkpoint, which it keeps only when its count tree is the one
	// signed.
	err = trail.InTx(ctx, func(tx trailStore) error {
		root, err := tx.CountsExtend(ctx, next.head.Size)
		if err != nil {
			return fmt.Errorf("count the rows in the database: %w", err)
		}
		if len(root) != tlog.HashSize || tlog.Hash(root) != next.head.Counts.Root {
			return &ChainError{Problem: CheckpointMismatch, Source: "the database", Detail: fmt.Sprintf(
				"its count tree of the first %d rows has root %s, the rows this signer read give %s: the stored counts were changed",
				next.head.Size, base64.StdEncoding.EncodeToString(root), next.head.Counts.Root)}
		}
		if err := tx.CheckpointRecord(ctx, s.actor, next.head, msg); err != nil {
			return fmt.Errorf("store the checkpoint: %w", err)
		}
		return nil
	})
	if err != nil {
		return Checkpoint{}, err
	}
	s.last = next
	return Checkpoint{TreeHead: next.head, Note: msg, Signer: s.signer.Name(), SignerHash: s.signer.KeyHash()}, nil
}

// mayNotRead says, of a login refused the rows it would sign, which group
// it needs: a checkpoint is the auditor's word on the trail, and reading
// the trail is the auditor's privilege. Any other error comes back as it
// is.
func mayNotRead(ctx context.Context, q store.Querier, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return err
	}
	group := "this deployment's auditor group"
	if d, derr := store.ReadDeployment(ctx, q); derr == nil {
		group = d.MustGroup("auditor")
	}
	return &store.Refusal{Rule: "role", Message: fmt.Sprintf(
		"audit checkpoint reads every row it signs, which needs membership of %s (%v): ask the schema owner to run `expiryctl access grant LOGIN auditor`",
		group, pgErr.Message)}
}

// base returns the newest tree this signer vouched for that it can go on
// from: the newest stored checkpoint signed by its key, when it carries a
// count tree and the database's count tree still counts its rows, checked
// against the database's rows and stored tree; otherwise the empty tree,
// from which every row is read.
func (s *checkpointSigner) base(ctx context.Context, snap trailStore, size int64) (*signedState, error) {
	empty := &signedState{edge: hashCache{}}
	notes, err := snap.CheckpointNotes(ctx, baseSearch)
	if err != nil {
		return nil, fmt.Errorf("read the stored checkpoints: %w", err)
	}
	counted, err := snap.CountsSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the count tree: %w", err)
	}
	for _, msg := range notes {
		n, err := note.Open(msg, note.VerifierList(s.verifier))
		if err != nil {
			continue // another signer's
		}
		head, err := parseCheckpointText(n.Text)
		if err != nil || head.Counts.IsZero() {
			return empty, nil // signed before the count tree
		}
		if head.Size > size {
			return nil, &ChainError{Seq: size + 1, Problem: CheckpointTruncated, Source: "the database", Detail: fmt.Sprintf(
				"this key signed a checkpoint of %d rows, the trail's tree now holds %d: rows were removed from the tail", head.Size, size)}
		}
		if counted != head.Size {
			return empty, nil // another signer counted further since
		}
		if s.last != nil && s.last.head == head {
			return s.last, nil
		}
		return loadSignedState(ctx, snap, head)
	}
	return empty, nil
}

// loadSignedState reads, for a tree this signer signed, the stored hashes
// it is made of and its last row, and checks both against the signed
// head: a database that changed or removed a row since is caught here.
// The count tree is checked where it is read, bucket by bucket.
func loadSignedState(ctx context.Context, snap trailStore, head TreeHead) (*signedState, error) {
	mismatch := func(format string, args ...any) error {
		return &ChainError{Problem: CheckpointMismatch, Source: "the database", Detail: fmt.Sprintf(format, args...) +
			": rows up to it were changed, removed or hidden from this login since it was signed; `expiryctl audit verify --checkpoint` names the first"}
	}
	var asked indexRecorder
	if _, err := tlog.TreeHash(head.Size, &asked); err != nil {
		return nil, err
	}
	if _, err := tlog.ProveRecord(head.Size, head.Size-1, &asked); err != nil {
		return nil, err
	}
	cache := hashCache{}
	if err := snap.TreeHashes(ctx, asked, func(idx int64, h []byte) error {
		if len(h) == tlog.HashSize {
			cache[idx] = tlog.Hash(h)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the stored tree: %w", err)
	}
	if root, err := tlog.TreeHash(head.Size, cache); err != nil || root != head.Root {
		return nil, mismatch("the stored tree of the %d rows this key signed last no longer has the signed root", head.Size)
	}
	last, found, err := snap.AuditHashAt(ctx, head.Size)
	if err != nil {
		return nil, fmt.Errorf("read row %d: %w", head.Size, err)
	}
	proof, err := tlog.ProveRecord(head.Size, head.Size-1, cache)
	if !found || err != nil || len(last) != sha256.Size || tlog.CheckRecord(proof, head.Size, head.Root, head.Size-1, tlog.RecordHash(last)) != nil {
		return nil, mismatch("row %d, the last this key signed, is not the row it signed", head.Size)
	}
	edge := hashCache{}
	var kept indexRecorder
	if _, err := tlog.TreeHash(head.Size, &kept); err != nil {
		return nil, err
	}
	for _, idx := range kept {
		edge[idx] = cache[idx]
	}
	return &signedState{head: head, lastHash: Hash(last), edge: edge}, nil
}

// extendChecked adds the rows after base up to head's size, each hash
// recomputed from the row's fields and linked to the one before, to
// base's tree, checks that they give the root the database computed, and
// counts them into base's count tree, of which it reads the buckets they
// fall in (checked against base's signed count tree); from the empty tree,
// it counts every row.
func extendChecked(ctx context.Context, snap trailStore, base *signedState, head TreeHead) (*signedState, error) {
	tree := &extendingTree{old: base.edge, first: tlog.StoredHashIndex(0, base.head.Size)}
	prev, next := base.lastHash, base.head.Size+1
	fail := func(seq int64, p Problem, format string, args ...any) error {
		return &ChainError{Seq: seq, Problem: p, Source: "the database", Detail: fmt.Sprintf(format, args...), Verified: max(seq-1, 0)}
	}
	tally := newCountTally(head.Size - base.head.Size)
	var buf []byte
	var bad error
	err := snap.AuditRange(ctx, rowRange{FromSeq: next, Last: &head.Size}, func(r *rawRow) error {
		switch {
		case r.seq > next:
			bad = fail(next, Gap, "%s missing, or hidden from this login", missingRows(next, r.seq-1))
		case r.seq < next:
			bad = fail(r.seq, DuplicateSeq, "a second row with seq %d", r.seq)
		case !bytes.Equal(r.prevHash, prev[:]):
			bad = fail(r.seq, BrokenLink, "prev_hash %x is not the hash of seq %d", r.prevHash, r.seq-1)
		}
		if bad != nil {
			return bad
		}
		buf = appendCanonical(buf[:0], r.seq, r.atMicros, r.actor, r.dbRole, r.action, r.target, r.details, r.outcome, r.prevHash)
		if prev = Hash(sha256.Sum256(buf)); !bytes.Equal(prev[:], r.hash) {
			bad = fail(r.seq, HashMismatch, "stored hash %x, computed %x", r.hash, prev)
			return bad
		}
		if err := tree.add(r.seq-1, prev[:]); err != nil {
			return err
		}
		add3(tally, r.seq, r.action, r.actor, r.target)
		next++
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, fmt.Errorf("read the rows to sign: %w", err)
	}
	if next <= head.Size {
		return nil, fail(next, Gap, "%s missing, or hidden from this login", missingRows(next, head.Size))
	}
	root, err := tlog.TreeHash(head.Size, tree)
	if err != nil {
		return nil, err
	}
	if root != head.Root {
		return nil, fail(head.Size, CheckpointMismatch, "the database's tree of %d rows has root %s, its rows hash to %s: the stored tree was changed",
			head.Size, head.Root, root)
	}
	if head.Counts, err = countOn(ctx, snap, base.head, tally); err != nil {
		return nil, err
	}
	var kept indexRecorder
	if _, err := tlog.TreeHash(head.Size, &kept); err != nil {
		return nil, err
	}
	edge := hashCache{}
	for _, idx := range kept {
		h, err := tree.ReadHashes([]int64{idx})
		if err != nil {
			return nil, err
		}
		edge[idx] = h[0]
	}
	return &signedState{head: head, lastHash: prev, edge: edge}, nil
}

// countOn returns the count tree of base's rows and those tallied since:
// from the empty tree, the tally's own; otherwise base's count tree, of
// which the buckets the tally touches are read from the database, checked
// against base's signed root, and counted on.
func countOn(ctx context.Context, snap trailStore, base TreeHead, tally *countTally) (CountsHead, error) {
	if base.Size == 0 {
		return countTreeOf(tally).root()
	}
	leaves := tally.leaves()
	touched := make([]int, len(leaves))
	for i, l := range leaves {
		touched[i] = bucketOf(l.Field, l.Value)
	}
	counts, err := readCountTree(ctx, snap, touched)
	if err != nil {
		return CountsHead{}, err
	}
	if was, err := counts.root(); err != nil || was != base.Counts {
		return CountsHead{}, &ChainError{Problem: CheckpointMismatch, Source: "the database", Detail: fmt.Sprintf(
			"its count tree of the %d rows this key signed last no longer has the signed root: the stored counts were changed; "+
				"`expiryctl audit verify --checkpoint` recounts the rows", base.Size)}
	}
	for _, l := range leaves {
		if _, err := counts.add(l.Field, l.Value, l.Count, l.Newest); err != nil {
			return CountsHead{}, err
		}
	}
	if err := counts.rehash(touched); err != nil {
		return CountsHead{}, err
	}
	return counts.root()
}

// extendingTree is a tree grown from an earlier one of which it keeps only
// the stored hashes that extending it reads (old); the hashes of the
// records added since are held from index first on.
type extendingTree struct {
	old   hashCache
	first int64
	fresh []tlog.Hash
}

// ReadHashes implements tlog.HashReader.
func (t *extendingTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		switch {
		case idx >= t.first && idx-t.first < int64(len(t.fresh)):
			out[i] = t.fresh[idx-t.first]
		case idx < t.first:
			h, ok := t.old[idx]
			if !ok {
				return nil, fmt.Errorf("audit tree: hash %d is not one the signed tree kept", idx)
			}
			out[i] = h
		default:
			return nil, fmt.Errorf("audit tree: hash %d is beyond the %d computed", idx, t.first+int64(len(t.fresh)))
		}
	}
	return out, nil
}

// add appends record n's stored hashes; records must come in order.
func (t *extendingTree) add(n int64, data []byte) error {
	hashes, err := tlog.StoredHashes(n, data, t)
	if err != nil {
		return err
	}
	t.fresh = append(t.fresh, hashes...)
	return nil
}
