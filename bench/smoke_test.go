package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmoke runs every scenario at a tiny size against the machine's
// PostgreSQL, RabbitMQ, goaws and Redis. It checks that each still runs and
// measures, not how fast: a scenario that errors is "could not be
// measured" and exits 2.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the smoke run takes about a minute")
	}
	bin := os.Getenv("EXPIRYCTL_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "expiryctl")
		build := exec.Command("go", "build", "-o", bin, "github.com/expiryctl/expiryctl/cmd/expiryctl")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build expiryctl: %v\n%s", err, out)
		}
	}
	var out bytes.Buffer
	code := Main([]string{"-smoke", "-bin", bin}, &out)
	report := out.String()
	if code != 0 {
		t.Fatalf("bench -smoke exited %d, want 0:\n%s", code, report)
	}
	for _, scenario := range []string{"1 ingest", "1 ingest ceiling", "5 replay ceiling", "5 replay broker limit", "5 replay floor", "2 list", "3 summary", "3 metrics", "4 list --limit 0", "5 replay", "5 audit", "6 tui", "7 sqs-ingest", "7 sqs-ingest ceiling", "8 sqs-replay",
		"9 river-ingest", "9 river-replay", "1 ingest CPU a letter", "5 replay CPU an item", "7 sqs-ingest CPU a letter", "8 sqs-replay CPU a message", "9 river-ingest CPU a job", "10 bullmq-ingest", "10 bullmq-replay", "11 jobtable-ingest", "11 jobtable-replay"} {
		if !strings.Contains(report, "\n"+scenario) {
			t.Errorf("the report has no %q line:\n%s", scenario, report)
		}
	}
	if !strings.Contains(report, " 0 could not be measured") {
		t.Errorf("some scenario could not be measured:\n%s", report)
	}
}
