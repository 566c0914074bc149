package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// Hash is a SHA-256 digest in the audit chain: a row's hash or the hash of the
// row before it.
type Hash [sha256.Size]byte

// ZeroHash is the prev_hash of the first row (seq 1): 32 zero bytes.
var ZeroHash Hash

// String returns h as 64 lowercase hex digits, the form every expiryctl
// output and export uses.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText encodes h as lowercase hex, so that JSON carries it as a string.
func (h Hash) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h[:]), nil }

// UnmarshalText decodes 64 hex digits (either case).
func (h *Hash) UnmarshalText(b []byte) error {
	parsed, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = parsed
	return nil
}

// ParseHash decodes 64 hex digits (either case) into a Hash.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("invalid hash %q: want 64 hex digits", s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("invalid hash %q: want 64 hex digits", s)
	}
	return h, nil
}

// ChainFields are the values a row's hash covers, in the database's own
// representation: Details is the exact text of details::text (jsonb's
// canonical rendering), never a re-serialisation of it.
type ChainFields struct {
	Seq int64
	// AtMicros is the row's time in microseconds since the Unix epoch, UTC.
	AtMicros int64
	Actor    string
	DBRole   string
	Action   string
	Target   string
	Details  string
	Outcome  string
	PrevHash Hash
}

// AppendCanonical appends the canonical encoding of f to dst and returns the
// extended slice. It is the Go twin of the SQL function
// expiryctl.audit_canonical, written independently of it from the
// specification in docs/audit.md:
//
//	int8 seq, big-endian
//	int8 microseconds since 1970-01-01T00:00:00Z, big-endian
//	for actor, db_role, action, target, details::text, outcome in that order:
//	    int4 byte length, big-endian, then the UTF-8 bytes
//	prev_hash, 32 raw bytes
//
// Nothing in it depends on a session setting: no time zone, date style or
// float formatting is involved.
func (f *ChainFields) AppendCanonical(dst []byte) []byte {
	return appendCanonical(dst, f.Seq, f.AtMicros, f.Actor, f.DBRole, f.Action, f.Target, f.Details, f.Outcome, f.PrevHash[:])
}

// appendCanonical is the one implementation of the encoding. It is generic so
// that the database verifier can hash the bytes pgx hands it without
// converting each field to a string first.
func appendCanonical[S ~string | ~[]byte](dst []byte, seq, atMicros int64, actor, dbRole, action, target, details, outcome S, prevHash []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(seq))
	dst = binary.BigEndian.AppendUint64(dst, uint64(atMicros))
	for _, field := range [...]S{actor, dbRole, action, target, details, outcome} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(field)))
		dst = append(dst, field...)
	}
	return append(dst, prevHash...)
}

// ComputeHash returns sha256 of f's canonical encoding: the hash the database
// stored for the row if the row is intact. The encoding ends with prev_hash,
// which is how each row commits to the whole chain before it.
func (f *ChainFields) ComputeHash() Hash {
	var buf [512]byte
	return sha256.Sum256(f.AppendCanonical(buf[:0]))
}

// timeLayout is how exports and listings write a row's time: RFC 3339 in
// UTC with exactly six fractional digits, so the text carries the full
// microsecond value the hash covers.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime writes t the way exports do: RFC 3339, UTC, six fractional
// digits ("2026-11-30T03:00:00.120000Z").
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// parseExportTime reads a time written by FormatTime and returns
// microseconds since the epoch. Only that exact form is accepted (UTC, "Z",
// six fractional digits): an export is a specified format, and a verifier
// that accepted every spelling of an instant would pass files that are not
// what expiryctl wrote.
func parseExportTime(s string) (int64, error) {
	if micros, ok := parseExportTimeDigits(s); ok {
		return micros, nil
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil || t.Format(timeLayout) != s {
		return 0, fmt.Errorf("invalid time %q: an export writes UTC with six fractional digits, e.g. 2026-11-30T03:00:00.120000Z", s)
	}
	return t.UnixMicro(), nil
}

// parseExportTimeDigits reads timeLayout by position, which a verifier of
// a million rows does far faster than time.Parse. It accepts only what
// time.Parse accepts and Format writes back unchanged, and reports false
// otherwise, for parseExportTime to decide.
func parseExportTimeDigits(s string) (int64, bool) {
	if len(s) != len(timeLayout) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		s[19] != '.' || s[26] != 'Z' {
		return 0, false
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	micro, ok7 := num(20, 26)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || month < 1 || month > 12 || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, micro*1000, time.UTC)
	// A day beyond the month's end would roll over into the next one.
	if t.Day() != day || day < 1 {
		return 0, false
	}
	return t.UnixMicro(), true
}
