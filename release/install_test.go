package release

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestGoInstallReportsItsBuild is the README's install line from a
// checkout: `go install ./cmd/expiryctl` into an empty GOBIN, with a
// user's default Go settings, gives a binary whose `version -o json` names
// the checkout's commit, its time as the build date, whether the tree was
// modified and the Go release.
func TestGoInstallReportsItsBuild(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// Go looks for a .git directory only: in a git worktree (whose .git
		// is a file) or an unpacked archive it stamps no commit, and a
		// user's `go install` from a clone is what this test is about.
		t.Skip("the checkout is not a git clone with a .git directory (a worktree?): Go stamps no VCS information here; run the test in a clone")
	}
	gobin := t.TempDir()
	install := exec.Command("go", "install", "./cmd/expiryctl")
	install.Dir = root
	// A user's Go settings: GOFLAGS empty but for Go's default
	// -buildvcs=auto, which the variable states so that a machine's `go
	// env -w GOFLAGS=-buildvcs=false` (this one's, some CI images') cannot
	// leave the commit out; the binary into GOBIN alone.
	install.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOBIN=")
	}), "GOFLAGS=-buildvcs=auto", "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/expiryctl: %v\n%s", err, out)
	}
	entries, _ := os.ReadDir(gobin)
	if len(entries) != 1 || entries[0].Name() != "expiryctl" {
		t.Fatalf("GOBIN holds %v, want expiryctl alone", entries)
	}
	out, err := exec.Command(filepath.Join(gobin, "expiryctl"), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("expiryctl version -o json: %v", err)
	}
	var got Build
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	commit, at, modified := gitHead(t, root)
	want := Build{Version: got.Version, Commit: commit, CommitTime: at, BuildDate: at, Modified: modified, Go: runtime.Version()}
	if got != want || got.Version == "" || got.Version == "dev" {
		t.Fatalf("version -o json: %#v\nwant %#v and a version from the build", got, want)
	}
}
