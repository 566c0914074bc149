// Package approval signs and checks what an approver approved, with the
// approver's own key, so that an approval is more than a row a database
// administrator can write.
//
// A Statement is a replay approval in canonical text, one field a line; it
// is signed as a signed note (golang.org/x/mod/sumdb/note, Ed25519), the
// format the audit trail's checkpoints use: a key is one line naming its
// owner, a signature names the key by name and hash, and the verifier key
// needs no other tooling. The key's name is the approver's database login.
// A Keyring holds the verifier keys a runner trusts, read from a file or a
// directory that the runner's machine keeps, never from the database.
package approval

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// header is the first line of every statement: a statement of another kind
// or version cannot be taken for this one.
const header = "expiryctl replay approval v1"

// Statement is what an approver signs: the request, what it will publish
// and how, who asked, who approves, and until when the approval holds.
type Statement struct {
	// Database is the name of the database the request lives in.
	Database string
	Request  int64
	Kind     string
	Cohort   string // the cohort hash, hex
	Items    int
	// Targets lists where the letters go, "exchange routing-key letters",
	// as the request shows them; Override is --to-exchange/--to-routing-key.
	Targets  []string
	Override string
	Rate     float64
	Canary   int
	// Stop is the stop conditions, as the request shows them.
	Stop             string
	FreshKey         bool
	IncludePermanent bool
	SameHandlerOK    bool
	// ViaExchange, Schedule ("not-before TIME", "include-not-due") and
	// Unwatched (the run need not capture its dead-letter queues) are
	// written only when set, so that a statement signed before they
	// existed still reads the same.
	ViaExchange bool
	Schedule    string
	Unwatched   bool
	Requester   string // the requester's database login
	Approver    string // the approver's database login, the key's name
	Expires     time.Time
}

// Text is the statement's canonical text, the signed note's body.
func (s Statement) Text() string {
	var b strings.Builder
	line := func(k, v string) { b.WriteString(k + " " + v + "\n") }
	b.WriteString(header + "\n")
	line("database", s.Database)
	line("request", strconv.FormatInt(s.Request, 10))
	line("kind", s.Kind)
	line("cohort", s.Cohort)
	line("items", strconv.Itoa(s.Items))
	for _, t := range s.Targets {
		line("target", t)
	}
	line("override", s.Override)
	line("rate", strconv.FormatFloat(s.Rate, 'g', -1, 64))
	line("canary", strconv.Itoa(s.Canary))
	line("stop", s.Stop)
	line("fresh-key", strconv.FormatBool(s.FreshKey))
	line("include-permanent", strconv.FormatBool(s.IncludePermanent))
	line("same-handler-ok", strconv.FormatBool(s.SameHandlerOK))
	if s.ViaExchange {
		line("via-exchange", "true")
	}
	if s.Schedule != "" {
		line("schedule", s.Schedule)
	}
	if s.Unwatched {
		line("unwatched", "true")
	}
	line("requester", s.Requester)
	line("approver", s.Approver)
	line("expires", s.Expires.UTC().Format(time.RFC3339))
	return b.String()
}

// ParseStatement reads Text's output; anything else is refused.
func ParseStatement(text string) (Statement, error) {
	var s Statement
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) == 0 || lines[0] != header {
		return s, fmt.Errorf("not an expiryctl replay approval (it does not begin %q)", header)
	}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, " ")
		var err error
		switch k {
		case "database":
			s.Database = v
		case "request":
			s.Request, err = strconv.ParseInt(v, 10, 64)
		case "kind":
			s.Kind = v
		case "cohort":
			s.Cohort = v
		case "items":
			s.Items, err = strconv.Atoi(v)
		case "target":
			s.Targets = append(s.Targets, v)
		case "override":
			s.Override = v
		case "rate":
			s.Rate, err = strconv.ParseFloat(v, 64)
		case "canary":
			s.Canary, err = strconv.Atoi(v)
		case "stop":
			s.Stop = v
		case "fresh-key":
			s.FreshKey, err = strconv.ParseBool(v)
		case "include-permanent":
			s.IncludePermanent, err = strconv.ParseBool(v)
		case "same-handler-ok":
			s.SameHandlerOK, err = strconv.ParseBool(v)
		case "via-exchange":
			s.ViaExchange, err = strconv.ParseBool(v)
		case "schedule":
			s.Schedule = v
		case "unwatched":
			s.Unwatched, err = strconv.ParseBool(v)
		case "requester":
			s.Requester = v
		case "approver":
			s.Approver = v
		case "expires":
			s.Expires, err = time.Parse(time.RFC3339, v)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return s, fmt.Errorf("the approval's line %q: %w", l, err)
		}
	}
	if s.Text() != text {
		return s, errors.New("the approval is not in its canonical form (fields missing, repeated or out of order)")
	}
	return s, nil
}

// Differences names the fields in which s and other differ, "rate: signed
// 50, now 500" each, so a refusal says what was changed.
func (s Statement) Differences(other Statement) []string {
	a, b := strings.Split(s.Text(), "\n"), strings.Split(other.Text(), "\n")
	var out []string
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("signed %q, now %q", x, y))
		}
	}
	return out
}

// GenerateKey makes an approver's Ed25519 signing key named login, the
// approver's database login, and its verifier key for the keyring.
func GenerateKey(login string) (signerKey, verifierKey string, err error) {
	signerKey, verifierKey, err = note.GenerateKey(rand.Reader, login)
	if err != nil {
		return "", "", fmt.Errorf("generate an approval key named %q: %w (the name is your database login: letters, digits and . - _, no spaces or +)", login, err)
	}
	return signerKey, verifierKey, nil
}

// Sign signs s with signerKey, whose name must be s.Approver.
func Sign(s Statement, signerKey string) ([]byte, error) {
	signer, err := note.NewSigner(strings.TrimSpace(signerKey))
	if err != nil {
		return nil, fmt.Errorf("read the approval key: %w (it is the file `expiryctl keys generate` wrote)", err)
	}
	if signer.Name() != s.Approver {
		return nil, fmt.Errorf("the approval key is named %q, and you approve as login %q: sign with a key named after your login", signer.Name(), s.Approver)
	}
	return note.Sign(&note.Note{Text: s.Text()}, signer)
}

// Keyring is the approvers' verifier keys a runner trusts.
type Keyring struct {
	// Path is where it was read from, for messages.
	Path    string
	keys    []note.Verifier
	byOwner map[string][]note.Verifier
}

// LoadKeyring reads verifier keys from path: a file of one key a line
// (blank lines and lines starting with # are skipped), or a directory whose
// regular files are each such a file.
func LoadKeyring(path string) (*Keyring, error) {
	k := &Keyring{Path: path, byOwner: map[string][]note.Verifier{}}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read the approvers' keyring: %w", err)
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("read the approvers' keyring: %w", err)
		}
		files = files[:0]
		for _, e := range entries {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read the approvers' keyring: %w", err)
		}
		for i, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			v, err := note.NewVerifier(l)
			if err != nil {
				return nil, fmt.Errorf("the approvers' keyring %s, line %d: %w (a line is a verifier key from `expiryctl keys generate`)", f, i+1, err)
			}
			k.keys = append(k.keys, v)
			k.byOwner[v.Name()] = append(k.byOwner[v.Name()], v)
		}
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("the approvers' keyring %s holds no key", path)
	}
	return k, nil
}

// Owners lists the logins the keyring has keys for.
func (k *Keyring) Owners() []string {
	var out []string
	for o := range k.byOwner {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// Open checks a signed approval against the keyring and reads its
// statement. The signature must be by a key of the keyring whose owner is
// the statement's approver.
func (k *Keyring) Open(signed []byte) (Statement, error) {
	n, err := note.Open(signed, note.VerifierList(k.keys...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			var by []string
			for _, sig := range unverified.Note.UnverifiedSigs {
				by = append(by, fmt.Sprintf("%s (key %08x)", sig.Name, sig.Hash))
			}
			return Statement{}, fmt.Errorf("it is signed by %s, a key not in the keyring %s", strings.Join(by, ", "), k.Path)
		}
		return Statement{}, fmt.Errorf("its signature does not verify: %w", err)
	}
	s, err := ParseStatement(n.Text)
	if err != nil {
		return Statement{}, err
	}
	for _, sig := range n.Sigs {
		if sig.Name == s.Approver {
			return s, nil
		}
	}
	return Statement{}, fmt.Errorf("it says approver %q and is signed by %s (key %08x): a key signs only for its owner", s.Approver, n.Sigs[0].Name, n.Sigs[0].Hash)
}
