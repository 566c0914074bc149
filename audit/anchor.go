package audit

import (
	"fmt"
	"strconv"
	"strings"
)

// Anchor is one point of the chain, a row's seq and hash, kept outside the
// database (in a ticket, an e-mail, a signed note) so that the trail can
// later be checked against it. An intact trail still has a row with that seq
// and that hash; a trail whose tail was cut, or whose rows up to the anchor
// were rewritten and re-hashed, does not.
type Anchor struct {
	Seq  int64
	Hash Hash
}

// String formats a as SEQ:HASH, the form `audit verify --anchor` takes.
func (a Anchor) String() string { return strconv.FormatInt(a.Seq, 10) + ":" + a.Hash.String() }

// ParseAnchor reads SEQ:HASH as printed by `audit export` and `audit verify`.
func ParseAnchor(s string) (Anchor, error) {
	seqText, hashText, ok := strings.Cut(strings.TrimSpace(s), ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if !ok || err != nil || seq <= 0 {
		return Anchor{}, fmt.Errorf("invalid anchor %q: use SEQ:HASH as printed by `expiryctl audit export` or `audit verify`, e.g. 4812:3f9a…", s)
	}
	h, err := ParseHash(hashText)
	if err != nil {
		return Anchor{}, fmt.Errorf("invalid anchor %q: the hash must be 64 hex digits", s)
	}
	return Anchor{Seq: seq, Hash: h}, nil
}
