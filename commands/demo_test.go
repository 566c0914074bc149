package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
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

// TestDemoRunRiver runs `expiryctl demo --river` on real services: beside
// the RabbitMQ incident it stages River's in the database --river-database
// names, captures the discarded jobs as `dlq ingest --queue river://…`
// does, and says how to replay them and which worker takes them.
func TestDemoRunRiver(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	riverDB := pgtest.NewEmpty(t)
	// River allows no capitals and no dots in a queue name.
	prefix := strings.ReplaceAll(strings.ToLower(amqptest.Name(t, "")), ".", "-")
	topo := worker.NewTopology(prefix)
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())

	f, out, errOut := auditFactory(t, db, "presenter")
	f.AMQPURLFlag = amqptest.URL()
	if err := runCmd(NewCmdDemo(f, nil), "--prefix", prefix, "--river", "--river-database", riverDB.Name); err != nil {
		t.Fatalf("demo --river: %v\n%s", err, errOut)
	}
	// No configuration names River's database: the letters name the
	// connection the demo's URL is given.
	queue := fmt.Sprintf("river://%s/%s-reservation-expiry", config.DeriveName("river", "127.0.0.1:5432", riverDB.Name), prefix)
	if !strings.Contains(errOut.String(), "captured 4 letters from "+queue+" (4 new)") {
		t.Fatalf("stderr lacks the River capture:\n%s", errOut)
	}
	if !strings.Contains(out.String(), queue) {
		t.Errorf("demo summary lacks the River queue %s:\n%s", queue, out)
	}
	worker := fmt.Sprintf("expiryctl worker --river-queue river://%s@127.0.0.1:5432/%s/%s-reservation-expiry", db.Pool.Config().ConnConfig.User, riverDB.Name, prefix)
	if !strings.Contains(errOut.String(), worker) || !strings.Contains(errOut.String(), "-river --reason transient-exhausted") {
		t.Errorf("stderr does not say how to replay the River letters:\n%s", errOut)
	}
	var letters int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.dead_letters WHERE source_queue = $1`, queue).Scan(&letters); err != nil {
		t.Fatal(err)
	}
	if letters != 4 {
		t.Errorf("%d letters of %s archived, want 4", letters, queue)
	}
}

func TestDemoRiverFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--river-database", "river"},
		{"--river", "--prefix", "Sandbox"},
		{"--river", "--prefix", "sandbox.one"},
	} {
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdDemo(f, func(context.Context, *DemoOptions) error { t.Fatalf("%q ran", args); return nil }), args...)
		wantExit(t, err, ExitUsage)
	}
	f, _, _ := testFactory(t)
	var got *DemoOptions
	if err := runCmd(NewCmdDemo(f, func(_ context.Context, o *DemoOptions) error { got = o; return nil }),
		"--river", "--prefix", "sandbox", "--river-database", "river_demo"); err != nil || !got.River || got.RiverDatabase != "river_demo" {
		t.Fatalf("demo --river: %+v (%v)", got, err)
	}
}

// TestDemoRunJobTable runs `expiryctl demo --job-table` on real services:
// beside the RabbitMQ incident it stages a jobs table's in the database
// --job-table-database names, grants --job-table-login what expiryctl
// needs, captures nothing (the mapping is not approved yet) and says what
// to propose, how to capture and which poller takes the replayed rows.
func TestDemoRunJobTable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	jobs := pgtest.NewEmpty(t)
	login := jobs.Login(t, "jobs")
	t.Cleanup(func() {
		_, _ = jobs.Pool.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{login.Name}.Sanitize())
	})
	prefix := amqptest.Name(t, "")
	topo := worker.NewTopology(prefix)
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())

	f, _, errOut := auditFactory(t, db, "presenter")
	f.AMQPURLFlag = amqptest.URL()
	if err := runCmd(NewCmdDemo(f, nil), "--prefix", prefix, "--job-table", "--job-table-database", jobs.Name, "--job-table-login", login.Name); err != nil {
		t.Fatalf("demo --job-table: %v\n%s", err, errOut)
	}
	// No configuration names the table's database: the mapping is kept
	// under the connection the demo's URL is given, and the capture is
	// told by URL.
	name := fmt.Sprintf("jobtable://%s/public.reservation_expiry_jobs", config.DeriveName("jobtable", "127.0.0.1:5432", jobs.Name))
	typed := fmt.Sprintf("jobtable://127.0.0.1:5432/%s/public.reservation_expiry_jobs", jobs.Name)
	value := regexp.MustCompile(`(?m)^  expiryctl policy set job_tables='(.*)' --why`).FindStringSubmatch(errOut.String())
	if value == nil {
		t.Fatalf("stderr does not say which mapping to propose:\n%s", errOut)
	}
	var tables map[string]jobtable.Mapping
	if err := json.Unmarshal([]byte(value[1]), &tables); err != nil || tables[name].Table != demo.JobTable {
		t.Errorf("the proposed job_tables %s (%v) does not map %s", value[1], err, name)
	}
	for _, want := range []string{
		"EXPIRYCTL_JOBTABLE_USER=" + login.Name + " expiryctl dlq ingest --queue " + typed,
		fmt.Sprintf("expiryctl worker --job-table jobtable://%s@127.0.0.1:5432/%s/public.reservation_expiry_jobs?sslmode=disable", db.Pool.Config().ConnConfig.User, jobs.Name),
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	var failed int
	if err := jobs.Pool.QueryRow(context.Background(), `SELECT count(*) FROM public.reservation_expiry_jobs WHERE status = 'failed'`).Scan(&failed); err != nil || failed != 4 {
		t.Errorf("%d failed jobs staged (%v), want 4", failed, err)
	}
	var letters int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.dead_letters WHERE source_queue = $1`, name).Scan(&letters); err != nil || letters != 0 {
		t.Errorf("%d letters of %s archived before its mapping is approved (%v), want none", letters, name, err)
	}
}

func TestDemoJobTableFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--job-table-database", "jobs"}, {"--job-table-login", "jobs_rw"}} {
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdDemo(f, func(context.Context, *DemoOptions) error { t.Fatalf("%q ran", args); return nil }), args...)
		wantExit(t, err, ExitUsage)
	}
	f, _, _ := testFactory(t)
	var got *DemoOptions
	if err := runCmd(NewCmdDemo(f, func(_ context.Context, o *DemoOptions) error { got = o; return nil }),
		"--job-table", "--job-table-database", "jobs_demo", "--job-table-login", "jobs_rw"); err != nil ||
		!got.JobTable || got.JobTableDatabase != "jobs_demo" || got.JobTableLogin != "jobs_rw" {
		t.Fatalf("demo --job-table: %+v (%v)", got, err)
	}
}
