package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/store"
)

// Checkpoint is a signed tree head: the trail's origin, its tree size and
// root hash, as transparency logs write a checkpoint, in a signed note.
type Checkpoint struct {
	TreeHead
	// Note is the signed note, text and signature lines, as printed.
	Note []byte
	// Signer is the name of the key that signed it, SignerHash that key's
	// hash.
	Signer     string
	SignerHash uint32
}

// SignedBy names the key that signed the checkpoint, by name and hash.
func (c Checkpoint) SignedBy() string { return KeyLabel(c.Signer, c.SignerHash) }

// GenerateKey makes an Ed25519 signing key for checkpoints named name,
// returning the private key (for --key) and the public verifier key (for
// --verifier), both in the signed-note key format.
func GenerateKey(name string) (signerKey, verifierKey string, err error) {
	signerKey, verifierKey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("generate a checkpoint key named %q: %w (a name is letters, digits and . - _, with no spaces or +)", name, err)
	}
	return signerKey, verifierKey, nil
}

// checkpointText is the checkpoint body: origin, size and root hash in
// base64, one per line, then, when the head has one, the count tree's
// line.
func checkpointText(head TreeHead) string {
	text := head.Origin + "\n" + strconv.FormatInt(head.Size, 10) + "\n" + head.Root.String() + "\n"
	if !head.Counts.IsZero() {
		text += head.Counts.line()
	}
	return text
}

// parseCheckpointText reads checkpointText. Lines after the third are
// extensions: the count tree's is read, any other ignored, as a
// transparency log's checkpoint reader ignores what it does not know.
func parseCheckpointText(text string) (TreeHead, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if !strings.HasSuffix(text, "\n") || len(lines) < 3 || lines[0] == "" {
		return TreeHead{}, errors.New("not a checkpoint: want an origin line, a tree size and a root hash")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10) {
		return TreeHead{}, fmt.Errorf("not a checkpoint: tree size %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return TreeHead{}, fmt.Errorf("not a checkpoint: root hash %q", lines[2])
	}
	head := TreeHead{Origin: lines[0], Size: size, Root: root}
	for _, line := range lines[3:] {
		counts, ok, err := parseCountsLine(line)
		switch {
		case err != nil:
			return TreeHead{}, err
		case ok && !head.Counts.IsZero():
			return TreeHead{}, errors.New("not a checkpoint: two count tree lines")
		case ok:
			head.Counts = counts
		}
	}
	return head, nil
}

// ErrEmptyTrail is a checkpoint asked of a trail with no rows: there is
// nothing to vouch for yet.
var ErrEmptyTrail = errors.New("the audit trail has no rows yet: there is nothing to sign")

// SignCheckpoint extends the tree to the trail's end, signs its head with
// signerKey and stores the checkpoint, audited as audit.checkpoint by
// actor. The checkpoint's own audit row comes after the head it signs.
//
// It signs nothing it did not check: the tree's root and the count tree
// (counts.go) are recomputed from the rows written since the newest
// checkpoint this key signed, after checking that the database's rows
// still give that checkpoint's trees, or from the first row when there is
// none. A database that changed, removed or hid a row is refused with a
// *ChainError.
func SignCheckpoint(ctx context.Context, pool *pgxpool.Pool, actor, signerKey string) (Checkpoint, error) {
	s, err := newCheckpointSigner(signerKey, actor)
	if err != nil {
		return Checkpoint{}, err
	}
	return s.sign(ctx, pool)
}

// OpenCheckpoint checks the signature of a checkpoint note against
// verifierKey and reads it. A key that cannot be read is a
// *VerifierKeyError, the caller's mistake; a note that is not signed by
// that key, or is not a checkpoint, is a *ChainError (checkpoint-signature
// or malformed), a failed verification. Keys are named by name and hash,
// as the note format identifies them.
func OpenCheckpoint(msg []byte, verifierKey string) (Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return Checkpoint{}, &VerifierKeyError{Err: err}
	}
	refuse := func(p Problem, format string, args ...any) (Checkpoint, error) {
		return Checkpoint{}, &ChainError{Problem: p, Source: "the checkpoint", Detail: fmt.Sprintf(format, args...)}
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			var by []string
			for _, sig := range unverified.Note.UnverifiedSigs {
				by = append(by, KeyLabel(sig.Name, sig.Hash))
			}
			return refuse(CheckpointSignature, "it is not signed by %s; it carries a signature of %s",
				KeyLabel(v.Name(), v.KeyHash()), strings.Join(by, ", "))
		}
		return refuse(CheckpointSignature, "it does not verify against %s: %v", KeyLabel(v.Name(), v.KeyHash()), err)
	}
	head, err := parseCheckpointText(n.Text)
	if err != nil {
		return refuse(Malformed, "signed by %s, but %v", KeyLabel(v.Name(), v.KeyHash()), err)
	}
	return Checkpoint{TreeHead: head, Note: msg, Signer: n.Sigs[0].Name, SignerHash: n.Sigs[0].Hash}, nil
}

// ReadCheckpoint reads a checkpoint note's head without checking its
// signature: what an exporter needs of a checkpoint a reviewer holds, to
// prove the trail consistent with it. The reviewer checks the signature.
func ReadCheckpoint(msg []byte) (TreeHead, error) {
	text, err := noteText(msg)
	if err != nil {
		return TreeHead{}, err
	}
	return parseCheckpointText(text)
}

// KeyLabel names a note key as people compare keys: its name and its
// hash, the eight hex digits after the name in the key's text.
func KeyLabel(name string, hash uint32) string {
	return fmt.Sprintf("%s (key %08x)", name, hash)
}

// VerifierKeyError is a verifier key that does not parse: a usage mistake,
// not a verification that failed.
type VerifierKeyError struct{ Err error }

func (e *VerifierKeyError) Error() string {
	return fmt.Sprintf("read the verifier key: %v (it is the line `expiryctl audit keygen` printed, name+hash+key)", e.Err)
}
func (e *VerifierKeyError) Unwrap() error { return e.Err }

// CoverStatus is how far the newest stored checkpoint covers the trail:
// the rows after Checkpointed are protected by the chain alone.
type CoverStatus struct {
	// Rows is the trail's last seq; Checkpointed the tree size the newest
	// checkpoint signed (0 without one).
	Rows, Checkpointed int64
	// NewestCheckpoint is when the newest checkpoint was stored; zero
	// without one.
	NewestCheckpoint time.Time
}

// Cover reads how far the newest stored checkpoint covers the trail.
func Cover(ctx context.Context, q store.Querier) (CoverStatus, error) {
	return newPostgresTrail(q).CheckpointCover(ctx)
}

// LatestCheckpoint returns the newest stored checkpoint note, or nil when
// none was made.
func LatestCheckpoint(ctx context.Context, q store.Querier) ([]byte, error) {
	return newPostgresTrail(q).CheckpointLatest(ctx)
}

// CheckpointEvery signs a checkpoint every interval until ctx is done, for a
// long-running process (`dlq ingest --follow --checkpoint-key`), and calls
// report with each one or with why it failed; a failure does not stop the
// next. A tree that has not grown since the newest stored checkpoint, by
// this signer or another, is not signed again.
//
// It keeps what it signed last, so that each checkpoint reads only the rows
// written since.
func CheckpointEvery(ctx context.Context, pool *pgxpool.Pool, actor, signerKey string, interval time.Duration, report func(Checkpoint, error)) {
	signer, err := newCheckpointSigner(signerKey, actor)
	if err != nil {
		report(Checkpoint{}, err)
		return
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		cover, err := Cover(ctx, pool)
		if err != nil {
			if ctx.Err() == nil {
				report(Checkpoint{}, err)
			}
			continue
		}
		// The newest checkpoint's own audit row is the only one since.
		if cover.Rows == 0 || cover.Rows <= cover.Checkpointed+1 && !cover.NewestCheckpoint.IsZero() {
			continue
		}
		cp, err := signer.sign(ctx, pool)
		if ctx.Err() != nil {
			return
		}
		report(cp, err)
	}
}
