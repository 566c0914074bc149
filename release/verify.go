package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files of a release directory that carry no artifact.
const (
	SumsFile      = "SHA256SUMS"
	SignatureFile = "SHA256SUMS.sig"
)

// artifactSuffixes are the files a release directory ships: a file with
// one of them that SHA256SUMS does not list was not released (or was
// renamed), and fails verification.
var artifactSuffixes = []string{".tar.gz", ".deb", ".rpm", ".cdx.json"}

// MismatchError says a release directory failed verification: File is the
// file that differs, Reason how.
type MismatchError struct {
	File   string
	Reason string
}

func (e *MismatchError) Error() string { return e.File + ": " + e.Reason }

// Report is what a verification found.
type Report struct {
	// Signer is the allowed_signers principals (or "the key given") and
	// the key's fingerprint that signed SHA256SUMS.
	Signer      string
	Fingerprint string
	// Checked are the files whose SHA-256 matched SHA256SUMS, in its
	// order; Absent the ones it lists that the directory does not hold
	// (a download of one archive is verified without the others).
	Checked []string
	Absent  []string
}

// Verify checks the release in dir: SHA256SUMS.sig must be a signature of
// SHA256SUMS in Namespace by a key that signers accept at now, and each
// file of dir that SHA256SUMS lists, and each artifact the directory
// holds, must have the SHA-256 that SHA256SUMS gives. The first
// difference is returned as a *MismatchError naming the file.
func Verify(dir string, signers []Signer, now time.Time) (Report, error) {
	var rep Report
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return rep, &MismatchError{File: SumsFile, Reason: missing(err)}
	}
	armored, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err != nil {
		return rep, &MismatchError{File: SignatureFile, Reason: missing(err)}
	}
	signer, err := checkSignature(sums, armored, signers, now)
	if err != nil {
		return rep, err
	}
	rep.Fingerprint = signer.Key.Fingerprint()
	rep.Signer = strings.Join(signer.Principals, ",")
	if rep.Signer == "" {
		rep.Signer = "the key given"
	}

	listed, err := parseSums(sums)
	if err != nil {
		return rep, err
	}
	for _, l := range listed {
		got, err := fileSHA256(filepath.Join(dir, l.name))
		if errors.Is(err, os.ErrNotExist) {
			rep.Absent = append(rep.Absent, l.name)
			continue
		}
		if err != nil {
			return rep, &MismatchError{File: l.name, Reason: err.Error()}
		}
		if got != l.sum {
			return rep, &MismatchError{File: l.name, Reason: fmt.Sprintf("its SHA-256 is %s, SHA256SUMS says %s: the file is not the one released", got, l.sum)}
		}
		rep.Checked = append(rep.Checked, l.name)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !isArtifact(name) {
			continue
		}
		if !slices.ContainsFunc(listed, func(l sumLine) bool { return l.name == name }) {
			return rep, &MismatchError{File: name, Reason: "SHA256SUMS does not list it: it is not part of the signed release"}
		}
	}
	if len(rep.Checked) == 0 {
		return rep, &MismatchError{File: SumsFile, Reason: "none of the files it lists is in " + dir}
	}
	return rep, nil
}

// checkSignature returns the signer whose key made armored over sums.
func checkSignature(sums, armored []byte, signers []Signer, now time.Time) (Signer, error) {
	sig, err := parseSignature(armored)
	if err != nil {
		return Signer{}, &MismatchError{File: SignatureFile, Reason: err.Error()}
	}
	var refusals []string
	for _, s := range signers {
		if !s.Key.equal(sig.key) {
			continue
		}
		if err := s.accepts(Namespace, now); err != nil {
			refusals = append(refusals, err.Error())
			continue
		}
		if err := sig.verifies(sums, Namespace); err != nil {
			return Signer{}, &MismatchError{File: SumsFile, Reason: err.Error() + " (or SHA256SUMS.sig belongs to another file)"}
		}
		return s, nil
	}
	if len(refusals) > 0 {
		return Signer{}, &MismatchError{File: SignatureFile, Reason: fmt.Sprintf("it is signed by %s, which the allowed signers do not accept now: %s",
			sig.key.Fingerprint(), strings.Join(refusals, "; "))}
	}
	return Signer{}, &MismatchError{File: SignatureFile, Reason: fmt.Sprintf("it is signed by %s, a key the allowed signers do not list", sig.key.Fingerprint())}
}

type sumLine struct{ sum, name string }

// parseSums reads sha256sum's output: "HEX  NAME" (or "HEX *NAME"), one
// file per line, each a plain name in the directory.
func parseSums(data []byte) ([]sumLine, error) {
	var lines []sumLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if text == "" {
			continue
		}
		sum, name, ok := strings.Cut(text, " ")
		name = strings.TrimPrefix(strings.TrimPrefix(name, " "), "*")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 2*sha256.Size || name == "" {
			return nil, &MismatchError{File: SumsFile, Reason: fmt.Sprintf("line %d is not `SHA256  NAME`", n)}
		}
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, &MismatchError{File: SumsFile, Reason: fmt.Sprintf("line %d names %q, which is not a file of the release directory", n, name)}
		}
		lines = append(lines, sumLine{sum: strings.ToLower(sum), name: name})
	}
	return lines, sc.Err()
}

func isArtifact(name string) bool {
	return slices.ContainsFunc(artifactSuffixes, func(s string) bool { return strings.HasSuffix(name, s) })
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func missing(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "missing from the release directory"
	}
	return err.Error()
}
