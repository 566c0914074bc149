package release

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Signer is one line of an allowed_signers file (ssh-keygen(1), "ALLOWED
// SIGNERS"): who may sign, with which key, in which namespaces and when.
type Signer struct {
	// Principals are the identities the line names ("release@expiryctl").
	Principals []string
	// Key is the signer's public key.
	Key PublicKey
	// Namespaces, when set, are the only namespaces the key may sign in.
	Namespaces []string
	// ValidAfter and ValidBefore, when not zero, bound when the key is
	// accepted: a key being rotated out keeps a valid-before, its
	// successor a valid-after, and the two overlap.
	ValidAfter, ValidBefore time.Time
	// line is the line's number in its file, for messages.
	line int
}

// KeyFileError says the file of allowed signers or the public key given to
// a verification could not be read: a mistake of the caller's, not a sign
// that the release was tampered with.
type KeyFileError struct {
	File string
	Err  error
}

func (e *KeyFileError) Error() string {
	return fmt.Sprintf("%s: %v (want an allowed_signers file, `PRINCIPALS [OPTIONS] ssh-ed25519 KEY`, or a public key, `ssh-ed25519 KEY [COMMENT]`)", e.File, e.Err)
}

func (e *KeyFileError) Unwrap() error { return e.Err }

// ParseSigners reads an allowed_signers file, or a single public key in
// authorized_keys form (a .pub file), which allows that key in every
// namespace at every time. Blank lines and # comments are skipped; a
// cert-authority line is refused, since a release is signed with a plain
// key. name is the file's name for messages.
func ParseSigners(name string, data []byte) ([]Signer, error) {
	var signers []Signer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSignerLine(line)
		if err != nil {
			return nil, &KeyFileError{File: name, Err: fmt.Errorf("line %d: %w", n, err)}
		}
		s.line = n
		signers = append(signers, s)
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{File: name, Err: err}
	}
	if len(signers) == 0 {
		return nil, &KeyFileError{File: name, Err: errors.New("it holds no key")}
	}
	return signers, nil
}

func parseSignerLine(line string) (Signer, error) {
	fields := splitUnquoted(line)
	// A public key file's line starts with the key's type.
	if fields[0] == ed25519KeyType {
		key, err := decodeKey(fields[1:])
		return Signer{Key: key}, err
	}
	if len(fields) < 3 {
		return Signer{}, errors.New("want PRINCIPALS [OPTIONS] KEYTYPE KEY")
	}
	s := Signer{Principals: strings.Split(unquote(fields[0]), ",")}
	rest := fields[1:]
	if rest[0] != ed25519KeyType {
		if err := s.parseOptions(rest[0]); err != nil {
			return Signer{}, err
		}
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != ed25519KeyType {
		return Signer{}, fmt.Errorf("the key is not %s: a release key is one", ed25519KeyType)
	}
	key, err := decodeKey(rest[1:])
	s.Key = key
	return s, err
}

func decodeKey(fields []string) (PublicKey, error) {
	if len(fields) == 0 {
		return PublicKey{}, errors.New("the key's base64 is missing")
	}
	wire, err := base64.StdEncoding.DecodeString(fields[0])
	if err != nil {
		return PublicKey{}, fmt.Errorf("the key is not base64: %w", err)
	}
	return parsePublicKey(wire)
}

// parseOptions reads the options field, as ssh-keygen does: names
// separated by commas, values in double quotes.
func (s *Signer) parseOptions(field string) error {
	for _, opt := range splitOptions(field) {
		name, value, _ := strings.Cut(opt, "=")
		value = unquote(value)
		var err error
		switch strings.ToLower(name) {
		case "namespaces":
			s.Namespaces = strings.Split(value, ",")
		case "valid-after":
			s.ValidAfter, err = parseSSHTime(value)
		case "valid-before":
			s.ValidBefore, err = parseSSHTime(value)
		case "cert-authority":
			return errors.New("cert-authority lines are not taken: a release is signed with a plain key")
		default:
			return fmt.Errorf("unknown option %q", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// parseSSHTime reads ssh-keygen's YYYYMMDD[HHMM[SS]][Z]: in UTC with the Z,
// in the local zone without it, as ssh-keygen reads it.
func parseSSHTime(v string) (time.Time, error) {
	loc := time.Local
	if t, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = t, time.UTC
	}
	for _, layout := range []string{"20060102", "200601021504", "20060102150405"} {
		if len(v) == len(layout) {
			return time.ParseInLocation(layout, v, loc)
		}
	}
	return time.Time{}, fmt.Errorf("%q is not YYYYMMDD[HHMM[SS]][Z]", v)
}

// accepts says why s does not accept a signature in namespace at now, or
// nil when it does.
func (s Signer) accepts(namespace string, now time.Time) error {
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, namespace) {
		return fmt.Errorf("line %d allows the key only in namespaces %s", s.line, strings.Join(s.Namespaces, ","))
	}
	if !s.ValidAfter.IsZero() && now.Before(s.ValidAfter) {
		return fmt.Errorf("line %d allows the key only from %s", s.line, s.ValidAfter.Format(time.RFC3339))
	}
	if !s.ValidBefore.IsZero() && !now.Before(s.ValidBefore) {
		return fmt.Errorf("line %d allowed the key only until %s: it was rotated out", s.line, s.ValidBefore.Format(time.RFC3339))
	}
	return nil
}

// splitUnquoted splits at whitespace outside double quotes.
func splitUnquoted(line string) []string {
	var fields []string
	var cur strings.Builder
	quoted := false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				fields = append(fields, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		fields = append(fields, cur.String())
	}
	return fields
}

// splitOptions splits an options field at commas outside double quotes.
func splitOptions(field string) []string {
	var opts []string
	start, quoted := 0, false
	for i, r := range field {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			opts = append(opts, field[start:i])
			start = i + 1
		}
	}
	return append(opts, field[start:])
}

func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}
