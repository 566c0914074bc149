package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binPath is the expiryctl binary every test runs.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests resolves the binary before any test starts, so that a missing or
// unbuildable binary fails once with one message instead of once per test.
func runTests(m *testing.M) int {
	if p := os.Getenv("EXPIRYCTL_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: EXPIRYCTL_BIN=%s is not usable (%v); build it with `make build` and pass an absolute path\n", p, err)
			return 1
		}
		binPath = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "expiryctl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "expiryctl")
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, "github.com/expiryctl/expiryctl/cmd/expiryctl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building expiryctl failed (%v); set EXPIRYCTL_BIN to use a binary built elsewhere\n", err)
		return 1
	}
	return m.Run()
}
