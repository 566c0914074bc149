package e2e_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// pythonBlock returns the Python code block under heading in docs/audit.md.
func pythonBlock(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/audit.md has no %q", heading)
	}
	_, code, ok := strings.Cut(after, "```python\n")
	if !ok {
		t.Fatalf("no Python block under %q", heading)
	}
	code, _, _ = strings.Cut(code, "```")
	path := filepath.Join(t.TempDir(), "verify.py")
	if err := os.WriteFile(path, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func python(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("python3", append([]string{script}, args...)...).CombinedOutput()
	if missing := (*exec.Error)(nil); errors.As(err, &missing) {
		t.Fatalf("python3 is needed to run the docs' verifiers: %v", err)
	}
	return string(out), err
}

// TestDocsVerifiersPassOnRealExports: the independent verifiers of
// docs/audit.md, written from the docs alone, pass on real exports and
// refuse a changed one.
func TestDocsVerifiersPassOnRealExports(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	_, otherKey := keygen(t, audrey, filepath.Join(dir, "other.key"))
	for range 5 {
		alice.ok(t, "dlq", "summary")
	}
	audrey.ok(t, "audit", "checkpoint", "--key", key)
	alice.ok(t, "dlq", "summary")

	for _, c := range []struct {
		heading, format, want string
		args                  []string
	}{
		{"### An independent verifier", "ndjson", "verified ", nil},
		{"### An independent evidence verifier", "evidence", "hash to the checkpoint's root", []string{vkey}},
	} {
		file := filepath.Join(dir, "trail."+c.format)
		audrey.ok(t, "audit", "export", "-o", c.format, "--out", file)
		script := pythonBlock(t, c.heading)
		if out, err := python(t, script, append([]string{file}, c.args...)...); err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: the docs' verifier on a real export: %v\n%s", c.heading, err, out)
		}
		data, _ := os.ReadFile(file)
		changed := filepath.Join(dir, "changed."+c.format)
		if err := os.WriteFile(changed, []byte(strings.Replace(string(data), `"actor":"alice`, `"actor":"mallory`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := python(t, script, append([]string{changed}, c.args...)...); err == nil {
			t.Errorf("%s: the docs' verifier passed a changed export:\n%s", c.heading, out)
		}
		if c.args != nil {
			if out, err := python(t, script, file, otherKey); err == nil || !strings.Contains(out, "no signature of") {
				t.Errorf("%s: the docs' verifier with another key: %v\n%s", c.heading, err, out)
			}
			forged := filepath.Join(dir, "forged."+c.format)
			// the checkpoint's size, edited in its note: the signature no longer holds
			header, rest, _ := strings.Cut(string(data), "\n")
			var h map[string]any
			if err := json.Unmarshal([]byte(header), &h); err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitN(h["checkpoint"].(string), "\n", 3)
			lines[1] += "0"
			h["checkpoint"] = strings.Join(lines, "\n")
			edited, _ := json.Marshal(h)
			if err := os.WriteFile(forged, []byte(string(edited)+"\n"+rest), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := python(t, script, forged, vkey); err == nil {
				t.Errorf("%s: the docs' verifier passed a forged checkpoint:\n%s", c.heading, out)
			}
		}
	}
}

// TestDocsCompletenessCheckOnRealExports: the completeness check of
// docs/audit.md, written from the docs alone, passes on a real export
// filtered on one target and on one that no row holds, and refuses a file
// with a row withheld from it and its list, or with its count edited.
func TestDocsCompletenessCheckOnRealExports(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	for range 4 {
		alice.ok(t, "dlq", "summary")
		alice.ok(t, "dlq", "list")
	}
	audrey.ok(t, "audit", "checkpoint", "--key", key)
	script := pythonBlock(t, "### An independent completeness check")

	for filter, want := range map[string]string{"dlq.list": "complete: 4 rows of action 'dlq.list'", "replay.approve": "complete: 0 rows of action 'replay.approve'"} {
		file := filepath.Join(dir, filter+".evidence")
		audrey.ok(t, "audit", "export", "--action", filter, "--out", file)
		if out, err := python(t, script, file, vkey); err != nil || !strings.Contains(out, want) {
			t.Errorf("the docs' completeness check on an export of %s: %v\n%s", filter, err, out)
		}
	}

	data, err := os.ReadFile(filepath.Join(dir, "dlq.list.evidence"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var h map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatal(err)
	}
	h["matched"] = h["matched"].([]any)[:3]
	withheld, _ := json.Marshal(h)
	for _, leaf := range h["counts"].(map[string]any)["leaves"].([]any) {
		if leaf := leaf.(map[string]any); leaf["value"] == "dlq.list" {
			leaf["count"] = 3
		}
	}
	recounted, _ := json.Marshal(h)
	for name, file := range map[string]string{
		"a row withheld with its listing": string(withheld) + "\n" + strings.Join(lines[1:4], "\n") + "\n",
		"the count edited to match":       string(recounted) + "\n" + strings.Join(lines[1:4], "\n") + "\n",
	} {
		path := filepath.Join(dir, "tampered.evidence")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := python(t, script, path, vkey); err == nil {
			t.Errorf("the docs' completeness check passed %s:\n%s", name, out)
		}
	}
}
