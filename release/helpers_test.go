package release

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// moduleRoot is the checkout the tests build from.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// gitHead is the checkout's commit, its time (RFC 3339, UTC) and whether
// the work tree differs from it, as Go's build information says them.
func gitHead(t *testing.T, root string) (commit, at string, modified bool) {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v (the test needs the checkout's git)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	commit, epoch := git("rev-parse", "HEAD"), git("log", "-1", "--format=%ct", "HEAD")
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return commit, time.Unix(secs, 0).UTC().Format(time.RFC3339), git("status", "--porcelain") != ""
}
