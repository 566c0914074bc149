package e2e_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// TestDemoBullMQService runs make demo's BullMQ service
// (e2e/node/demo_bullmq.js) on a queue of the test's own: staging seeds
// held reservations and leaves one job each in the failed set after two
// attempts with a transient error; a second staging on the busy queue is
// refused. The fixed Worker then expires each reservation once when the
// jobs are retried (by BullMQ's own Job.retry, as a replay retries them
// in place), and stops cleanly on an interrupt.
func TestDemoBullMQService(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t)
	q := bullmqtest.NewQueue(t)
	dir := bullmqtest.RequireNode(t)
	db := pgtest.New(t)
	if err := worker.EnsureSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "EXPIRYCTL_DATABASE_URL="+db.URL, "REDIS_HOST="+q.Ref.Host, fmt.Sprintf("REDIS_PORT=%d", q.Ref.Port),
		"BULLMQ_PREFIX="+q.Ref.Prefix)
	node := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "demo_bullmq.js")}, args...)...)
		cmd.Env = env
		return cmd
	}
	if out, err := node("stage", q.Ref.Queue, "run1").CombinedOutput(); err != nil || !strings.Contains(string(out), "failed 4 jobs r-run1-bullmq-*") {
		t.Fatalf("stage: %v\n%s", err, out)
	}
	ids := q.Client.ZRange(ctx, q.Key("failed"), 0, -1).Val()
	if len(ids) != 4 {
		t.Fatalf("the failed set holds %v, want 4 jobs", ids)
	}
	for _, id := range ids {
		h := q.Hash(t, id)
		if h["atm"] != "2" || !strings.HasPrefix(h["failedReason"], "db_timeout: reservation r-run1-bullmq-") {
			t.Errorf("job %s: %s attempts made, failed %q; want 2, db_timeout", id, h["atm"], h["failedReason"])
		}
	}
	var held int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations.reservations WHERE id LIKE 'r-run1-bullmq-%'
		AND status = 'held' AND version = 4 AND hold_until < now()`).Scan(&held); err != nil || held != 4 {
		t.Fatalf("%d held and due reservations seeded (%v), want 4", held, err)
	}

	retrier := bullmqtest.StartQueue(t, q)
	retrier.Retry(ids[0])
	if out, err := node("stage", q.Ref.Queue, "run2").CombinedOutput(); err == nil || !strings.Contains(string(out), "holds 1 jobs a Worker would take") {
		t.Errorf("stage on a queue with a waiting job: %v\n%s; want a refusal", err, out)
	}

	work := node("work", q.Ref.Queue)
	stdout, err := work.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		retrier.Retry(id)
	}
	lines := bufio.NewScanner(stdout)
	expired := map[string]bool{}
	for len(expired) < 4 && lines.Scan() {
		if r, ok := strings.CutPrefix(lines.Text(), "expired "); ok {
			expired[strings.Fields(r)[0]] = true
		}
	}
	if len(expired) != 4 {
		t.Fatalf("the Worker expired %v, want the four reservations", expired)
	}
	var releases int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations.capacity_releases WHERE reservation_id LIKE 'r-run1-bullmq-%'`).Scan(&releases); err != nil || releases != 4 {
		t.Errorf("%d capacity releases (%v), want one for each reservation", releases, err)
	}
	_ = work.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- work.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the interrupted Worker exited %v, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("the Worker did not stop on an interrupt")
	}
}
