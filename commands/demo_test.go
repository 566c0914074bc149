package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// TestDemoRun runs `expiryctl demo` on real services, the only place its
// work can happen (internal/sim/demo tests the incident it stages): it
// records the run, captures the dead letters with the services of
// `dlq ingest` and summarises them as `dlq summary` does.
func TestDemoRun(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	prefix := amqptest.Name(t, "")
	topo := worker.NewTopology(prefix)
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())

	f, out, errOut := auditFactory(t, db, "presenter")
	f.AMQPURLFlag = amqptest.URL()
	if err := runCmd(NewCmdDemo(f, nil), "--prefix", prefix); err != nil {
		t.Fatalf("demo: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != "CATEGORY\tWAITING\tQUEUES" || len(lines) < 6 {
		t.Fatalf("demo summary:\n%s", out)
	}
	if !strings.Contains(out.String(), "transient-exhausted\t5\t["+topo.DeadLetterQueue+"]") {
		t.Fatalf("demo summary lacks the transient letters of %s:\n%s", topo.DeadLetterQueue, out)
	}
	if !strings.Contains(errOut.String(), "captured 21 letters from "+topo.DeadLetterQueue+" (21 new)") {
		t.Fatalf("stderr:\n%s", errOut)
	}
	var runs, ingests int
	ctx := context.Background()
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'demo.run' AND outcome = 'ok'),
		count(*) FILTER (WHERE action LIKE 'dlq.ingest%') FROM expiryctl.audit_log WHERE actor = 'presenter'`).Scan(&runs, &ingests); err != nil {
		t.Fatal(err)
	}
	if runs != 1 || ingests == 0 {
		t.Fatalf("recorded %d demo runs and %d ingest rows as presenter, want 1 and some", runs, ingests)
	}
}
