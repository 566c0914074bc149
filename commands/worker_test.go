package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// syncBuffer is a buffer a command may write from one goroutine while the
// test reads it from another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWorkerRun runs the reference worker the way `expiryctl worker` does,
// on real services (its whole job is theirs; internal/sim/worker tests what
// it does with jobs): it declares its topology, says what it consumes, and
// an interrupt is a clean stop, not an error.
func TestWorkerRun(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	prefix := amqptest.Name(t, "")
	topo := worker.NewTopology(prefix)
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())

	f, _, _ := testFactory(t)
	errOut := &syncBuffer{}
	f.IO.ErrOut = errOut
	f.DatabaseURLFlag, f.AMQPURLFlag = db.URL, amqptest.URL()
	t.Cleanup(f.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runCmdContext(ctx, NewCmdWorker(f, nil), "--prefix", prefix, "--concurrency", "2", "--handler-version", "v9-test")
	}()

	deadline := time.After(30 * time.Second)
	for !strings.Contains(errOut.String(), "worker v9-test consuming "+topo.Queue+" (dead letters go to "+topo.DeadLetterQueue+"); Ctrl-C stops it") {
		select {
		case err := <-done:
			t.Fatalf("worker stopped before consuming: %v\n%s", err, errOut)
		case <-deadline:
			t.Fatalf("the worker never said it consumes:\n%s", errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Its connection advertises its version, as a replay's handler check
	// reads it from the management API.
	consumers := f.Consumers()
	for {
		got, err := consumers.TargetConsumers(ctx, []replay.Target{{RoutingKey: topo.Queue}})
		if err == nil && len(got) == 1 && len(got[0].Consumers) == 1 && got[0].Consumers[0].HandlerVersion == "v9-test" {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the management API never showed the worker on %s advertising v9-test: %+v, %v", topo.Queue, got, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	cancel()
	wantWorkerCleanStop(t, done)
}

func TestWorkerRunFlagsAndConnections(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--max-attempts", "0"}, {"--concurrency", "0"}, {"--handler-version", " "},
		{"--backoff-base", "0s"}, {"--backoff-cap", "1s", "--backoff-base", "2s"}, {"--backoff-jitter", "1.5"}} {
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdWorker(f, func(context.Context, *WorkerOptions) error { t.Fatal("ran"); return nil }), args...)
		wantExit(t, err, ExitUsage)
	}
	// The version: the flag over EXPIRYCTL_HANDLER_VERSION over the default.
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, worker.DefaultHandlerVersion},
		{"2026.12-env", nil, "2026.12-env"},
		{"2026.12-env", []string{"--handler-version", "2026.12-flag"}, "2026.12-flag"},
	} {
		f, _, _ := testFactory(t)
		f.Getenv = func(k string) string {
			if k == "EXPIRYCTL_HANDLER_VERSION" {
				return tc.env
			}
			return ""
		}
		var got string
		if err := runCmd(NewCmdWorker(f, func(_ context.Context, o *WorkerOptions) error { got = o.HandlerVersion; return nil }), tc.args...); err != nil || got != tc.want {
			t.Errorf("env %q args %q: version %q (%v), want %q", tc.env, tc.args, got, err, tc.want)
		}
	}
	// The retry policy: the seed's by default, each part a flag.
	for _, tc := range []struct {
		args     []string
		attempts int
		backoff  worker.Backoff
	}{
		{nil, 7, worker.DefaultBackoff},
		{[]string{"--max-attempts", "3", "--backoff-base", "1s", "--backoff-cap", "1m", "--backoff-jitter", "0.5"}, 3,
			worker.Backoff{Base: time.Second, Max: time.Minute, Jitter: worker.SpreadJitter, Spread: 0.5}},
	} {
		f, _, _ := testFactory(t)
		var got *WorkerOptions
		if err := runCmd(NewCmdWorker(f, func(_ context.Context, o *WorkerOptions) error { got = o; return nil }), tc.args...); err != nil ||
			got.MaxAttempts != tc.attempts || got.Backoff != tc.backoff {
			t.Errorf("args %q: %+v (%v), want %d attempts and %+v", tc.args, got, err, tc.attempts, tc.backoff)
		}
	}
	f, _, _ := testFactory(t)
	err := runCmd(NewCmdWorker(f, func(ctx context.Context, o *WorkerOptions) error {
		o.DB = func(context.Context) (*pgxpool.Pool, error) {
			return nil, &store.ConnectError{Address: "127.0.0.1:1", Err: errors.New("connection refused")}
		}
		return workerRun(ctx, o)
	}))
	wantExit(t, err, ExitUnavailable)
}

// TestWorkerRiverQueueFlags: a --river-queue River could not work is a
// usage error before anything is dialed, and one it could reaches the run
// as given.
func TestWorkerRiverQueueFlags(t *testing.T) {
	t.Parallel()
	wantWorkerUsageErrors(t, [][]string{
		{"--river-queue", "postgres://127.0.0.1/river/expiry"},
		{"--river-queue", "river://127.0.0.1/river"},
		{"--river-queue", "river://127.0.0.1/river/expiry?sslmode=maybe"},
		{"--river-queue", "river://127.0.0.1/river/Reservation.Expiry"},
		{"--river-queue", "river://127.0.0.1/river/expiry", "--sqs-queue", "sqs://expiry"},
	})
	f, _, _ := testFactory(t)
	var got string
	if err := runCmd(NewCmdWorker(f, func(_ context.Context, o *WorkerOptions) error { got = o.RiverQueue; return nil }),
		"--river-queue", "river://127.0.0.1/river/reservation-expiry"); err != nil || got != "river://127.0.0.1/river/reservation-expiry" {
		t.Fatalf("worker --river-queue: %q (%v)", got, err)
	}
}

// TestWorkerRunRiver runs `expiryctl worker --river-queue` on a real River
// database (internal/sim/worker tests what it does with jobs): it reaches
// River as EXPIRYCTL_RIVER_USER, says what it works, and an interrupt is a
// clean stop.
func TestWorkerRunRiver(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	riverDB := pgtest.NewEmpty(t)
	migrator, err := rivermigrate.New(riverpgxv5.New(riverDB.Pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory(t)
	errOut := &syncBuffer{}
	f.IO.ErrOut = errOut
	f.DatabaseURLFlag = db.URL
	f.Getenv = func(k string) string {
		if k == riverjobs.UserEnv {
			return "postgres"
		}
		return ""
	}
	t.Cleanup(f.Close)
	queue := fmt.Sprintf("river://127.0.0.1:5432/%s/reservation-expiry?sslmode=disable", riverDB.Name)
	// The worker names the queue as letters would: by the connection a
	// URL typed on the command line is given.
	conn := config.DeriveName("river", "127.0.0.1:5432", riverDB.Name)
	runWorkerUntilInterrupted(t, f, errOut,
		fmt.Sprintf("working River queue river://%s/reservation-expiry; Ctrl-C stops it", conn), 0,
		"--river-queue", queue)
}

// wantWorkerUsageErrors runs `expiryctl worker` with each of argsList and
// wants a usage error, before anything is dialed.
func wantWorkerUsageErrors(t *testing.T, argsList [][]string) {
	t.Helper()
	for _, args := range argsList {
		f, _, _ := testFactory(t)
		f.DatabaseURLFlag = "postgres://nobody@127.0.0.1:1/none?sslmode=disable"
		err := runCmd(NewCmdWorker(f, nil), args...)
		wantExit(t, err, ExitUsage)
	}
}

// runWorkerUntilInterrupted runs `expiryctl worker args…` until it says
// want on stderr, lets it run for settle more, then interrupts it and
// expects a clean stop.
func runWorkerUntilInterrupted(t *testing.T, f *Factory, errOut *syncBuffer, want string, settle time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runCmdContext(ctx, NewCmdWorker(f, nil), args...) }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(errOut.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("worker stopped before saying %q: %v\n%s", want, err, errOut)
		case <-deadline:
			t.Fatalf("the worker never said %q:\n%s", want, errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(settle)
	cancel()
	wantWorkerCleanStop(t, done)
}

// TestWorkerJobTableFlags: a --job-table that names no table, or one given
// with another system's queue, is a usage error before anything is
// dialed, and one that names a table reaches the run as given.
func TestWorkerJobTableFlags(t *testing.T) {
	t.Parallel()
	wantWorkerUsageErrors(t, [][]string{
		{"--job-table", "postgres://127.0.0.1/jobs/public.expiry_jobs"},
		{"--job-table", "jobtable://127.0.0.1/jobs"},
		{"--job-table", "jobtable://127.0.0.1/jobs/expiry_jobs"},
		{"--job-table", "jobtable://127.0.0.1/jobs/public.expiry_jobs", "--sqs-queue", "sqs://expiry"},
		{"--job-table", "jobtable://127.0.0.1/jobs/public.expiry_jobs", "--river-queue", "river://127.0.0.1/river/expiry"},
	})
	f, _, _ := testFactory(t)
	var got string
	if err := runCmd(NewCmdWorker(f, func(_ context.Context, o *WorkerOptions) error { got = o.JobTable; return nil }),
		"--job-table", "jobtable://127.0.0.1/jobs/public.expiry_jobs"); err != nil || got != "jobtable://127.0.0.1/jobs/public.expiry_jobs" {
		t.Fatalf("worker --job-table: %q (%v)", got, err)
	}
}

// TestWorkerRunJobTable runs `expiryctl worker --job-table` on a real jobs
// table (internal/sim/worker tests what it does with rows): it reaches the
// table's database as EXPIRYCTL_JOBTABLE_USER, says what it polls, and an
// interrupt is a clean stop.
func TestWorkerRunJobTable(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	jobs := pgtest.NewEmpty(t)
	if _, err := jobs.Pool.Exec(context.Background(), `CREATE TABLE public.expiry_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
		status text NOT NULL DEFAULT 'pending', attempt_count int NOT NULL DEFAULT 0, last_error text,
		run_at timestamptz NOT NULL DEFAULT now(), failed_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory(t)
	errOut := &syncBuffer{}
	f.IO.ErrOut = errOut
	f.DatabaseURLFlag = db.URL
	f.Getenv = func(k string) string {
		if k == jobtable.UserEnv {
			return "postgres"
		}
		return ""
	}
	t.Cleanup(f.Close)
	table := fmt.Sprintf("jobtable://127.0.0.1:5432/%s/public.expiry_jobs?sslmode=disable", jobs.Name)
	// A moment of polling the empty table, so that the stop comes mid-poll.
	conn := config.DeriveName("jobtable", "127.0.0.1:5432", jobs.Name)
	runWorkerUntilInterrupted(t, f, errOut,
		fmt.Sprintf("polling jobs table jobtable://%s/public.expiry_jobs; Ctrl-C stops it", conn), 200*time.Millisecond,
		"--job-table", table)
}

// wantWorkerCleanStop wants the interrupted worker command to return nil
// within 30 s.
func wantWorkerCleanStop(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("an interrupted worker returned %v, want a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop when interrupted")
	}
}
