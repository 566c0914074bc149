package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// readmeMark marks a README code block that TestReadmeFlowRuns runs.
const readmeMark = "<!-- readme: run -->"

// The README's flow names these; the test swaps in its own database and
// queue prefix, and nothing else.
const (
	readmeServer = "@127.0.0.1:5432/expiryctl_demo"
	readmePrefix = "oncall"
)

// readmeBlocks returns the shell blocks of README.md marked readmeMark (on
// the line before the block), in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(doc)
	for {
		// The mark on a line of its own: the prose may quote it.
		_, after, ok := strings.Cut(rest, "\n"+readmeMark+"\n")
		if !ok {
			return blocks
		}
		code, ok := strings.CutPrefix(after, "```sh\n")
		if !ok {
			t.Fatalf("README.md: %s is not followed by a ```sh block", readmeMark)
		}
		code, rest, ok = strings.Cut(code, "```")
		if !ok {
			t.Fatal("README.md: a marked block is not closed")
		}
		blocks = append(blocks, code)
	}
}

// TestReadmeFlowRuns runs the README's setup, triage and governed replay,
// as written and in order, in one shell, as the people the README names
// (the logins scripts/services.sh creates), against a database of the
// test's own owned by expiryctl_owner, and queues under a prefix of its
// own: a flow whose steps do not join up (an empty cohort, no consumer)
// fails here.
func TestReadmeFlowRuns(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t)
	if len(blocks) < 3 {
		t.Fatalf("README.md marks %d blocks to run, want the setup, triage and governed replay", len(blocks))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		t.Fatalf("PostgreSQL is required (start it with scripts/services.sh): %v", err)
	}
	defer admin.Close(context.Background())
	var people int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN ('expiryctl_owner', 'alice', 'bob', 'expiryctl_demo_operator')`).Scan(&people); err != nil || people != 4 {
		t.Fatalf("the README's people (expiryctl_owner, alice, bob) and deployment demo's groups are missing (%v): run scripts/services.sh", err)
	}
	random := make([]byte, 4)
	_, _ = rand.Read(random)
	suffix := hex.EncodeToString(random)
	dbName := "expiryctl_readme_" + suffix
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName+" OWNER expiryctl_owner"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin, err := pgx.Connect(ctx, pgtest.AdminURL())
		if err == nil {
			defer admin.Close(context.Background())
			_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
		}
		if err != nil {
			t.Errorf("drop %s: %v", dbName, err)
		}
	})
	prefix := "test.readme." + suffix
	top := worker.NewTopology(prefix)
	amqptest.Dial(t)
	amqptest.DeleteOnCleanup(t, top.Queues(), []string{top.Exchange, top.DeadLetterExchange})

	server, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\n" +
		// A step that fails must not leave the README's worker behind.
		"trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
	for _, b := range blocks {
		script += b
	}
	script = strings.ReplaceAll(script, readmeServer, "@"+server.Host+"/"+dbName)
	script = regexp.MustCompile(`\b`+readmePrefix+`\b`).ReplaceAllString(script, prefix)

	// The README's reader put bin/ on PATH; the binary under test is
	// called expiryctl there.
	dir := t.TempDir()
	if err := os.Symlink(binPath, filepath.Join(dir, "expiryctl")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"EXPIRYCTL_AMQP_URL="+amqptest.URL(), "NO_COLOR=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's flow failed (%v):\n--- script\n%s\n--- output\n%s", err, script, out)
	}
	for _, want := range []string{"approver granted to bob", "is approved by bob", "completed: 5 confirmed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's flow did not say %q:\n%s", want, out)
		}
	}
}
