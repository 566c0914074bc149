package e2e_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestVersionNamesTheCommit: the binary the tests run (built by `make build`
// or by TestMain) reports the commit it was built from, not "dev".
func TestVersionNamesTheCommit(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (the test needs the checkout's git)", err)
	}
	out, err := exec.Command(binPath, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if v.Commit != strings.TrimSpace(string(head)) || v.Version == "dev" || v.Version == "" {
		t.Fatalf("version %+v, want the checkout's commit %s (build the binary with `make build`, which stamps it: -buildvcs=auto)", v, head)
	}
	flag, err := exec.Command(binPath, "--version").Output()
	if err != nil || !strings.Contains(string(flag), "commit "+v.Commit[:12]) {
		t.Errorf("--version printed %q (%v), want the commit", flag, err)
	}
}
