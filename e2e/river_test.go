package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// riverExpiry is the contract's expiry job as a River job.
type riverExpiry struct {
	ReservationID  string `json:"reservation_id"`
	HoldUntil      string `json:"hold_until"`
	IdempotencyKey string `json:"idempotency_key"`
}

func (riverExpiry) Kind() string { return "reservation_expiry" }

// riverWorker fails every job, with a deadlock's error, until told to
// succeed, and the poisoned reservation always; it counts its runs of
// each job after it was told to succeed.
type riverWorker struct {
	river.WorkerDefaults[riverExpiry]
	succeed atomic.Bool
	poison  string

	mu    sync.Mutex
	after map[int64]int
}

func (w *riverWorker) Work(_ context.Context, job *river.Job[riverExpiry]) error {
	if w.succeed.Load() {
		w.mu.Lock()
		w.after[job.ID]++
		w.mu.Unlock()
		if job.Args.ReservationID != w.poison {
			return nil
		}
	}
	return fmt.Errorf("ERROR: deadlock detected (SQLSTATE 40P01) expiring %s", job.Args.ReservationID)
}

func (w *riverWorker) runsAfter(id int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.after[id]
}

type riverSoon struct{}

func (riverSoon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(10 * time.Millisecond) }

// TestRiverIncident runs a River incident through the CLI, as people: a
// real River client's worker discards jobs after a deadlock; the ingester
// captures them from River's database without changing it, twice, and
// stores each once; alice asks for their replay and bob approves it;
// meanwhile someone else retries one job through River itself. alice's run
// retries the others in place through River's API, skips that one and
// says why, and the worker, fixed, runs each job exactly once. The job
// that fails again comes back as a new letter linked to the first and to
// the replay.
// riverWorld is a River database whose queue "expiry" a real River
// client works with a riverWorker, holding n contract jobs that the worker
// failed until River discarded them.
type riverWorld struct {
	db     *pgtest.Database
	client *river.Client[pgx.Tx]
	w      *riverWorker
	jobs   []int64
	// queue reaches the River queue as the test's login; name is how
	// letters name it, through the connection "river" of config, the
	// configuration file that reaches River's database.
	queue, name, config string
}

func newRiverWorld(t *testing.T, n int, poison string) *riverWorld {
	t.Helper()
	ctx := context.Background()
	riverDB := pgtest.NewEmpty(t)
	migrator, err := rivermigrate.New(riverpgxv5.New(riverDB.Pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("River's migrations: %v", err)
	}
	w := &riverWorker{after: map[int64]int{}, poison: poison}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(riverDB.Pool), &river.Config{
		Queues:            map[string]river.QueueConfig{"expiry": {MaxWorkers: 4}},
		Workers:           workers,
		MaxAttempts:       2,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		RetryPolicy:       riverSoon{},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stop)
	})
	rw := &riverWorld{db: riverDB, client: client, w: w, jobs: make([]int64, n),
		queue: fmt.Sprintf("river://postgres@127.0.0.1:5432/%s/expiry", riverDB.Name),
		name:  "river://river/expiry",
		config: configFile(t, map[string]connection{"river": {system: "river",
			url: fmt.Sprintf("postgres://postgres@127.0.0.1:5432/%s?sslmode=disable", riverDB.Name)}})}
	for i := range n {
		res, err := client.Insert(ctx, riverExpiry{ReservationID: fmt.Sprintf("r-river-%d", i), HoldUntil: "2026-11-30T12:20:00Z",
			IdempotencyKey: fmt.Sprintf("expire:r-river-%d:v1", i)}, &river.InsertOpts{Queue: "expiry"})
		if err != nil {
			t.Fatal(err)
		}
		rw.jobs[i] = res.Job.ID
	}
	waitFor(t, 60*time.Second, "River to discard the jobs", func() bool { return rw.states(t)["discarded"] == n })
	return rw
}

// states counts River's jobs by state.
func (rw *riverWorld) states(t *testing.T) map[string]int {
	t.Helper()
	rows, err := rw.db.Pool.Query(context.Background(), `SELECT state::text, count(*)::int FROM river_job GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var k int
		if err := rows.Scan(&s, &k); err != nil {
			t.Fatal(err)
		}
		out[s] = k
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRiverIncident(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 4
	rw := newRiverWorld(t, n, "r-river-3")
	riverDB, client, w, jobs, queue, name := rw.db, rw.client, rw.w, rw.jobs, rw.queue, rw.name
	riverStates := func() map[string]int { return rw.states(t) }
	digest := func() string {
		var d string
		if err := riverDB.Pool.QueryRow(ctx, `SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM river_job j`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()

	db := pgtest.New(t)
	// The run watches its retried jobs for 3 s after the last: long
	// enough for its capture of River's queue, which polls every 500 ms,
	// to see the poisoned job discarded again.
	setPolicy(t, db, "canary_window=3s")
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "").withConfig(rw.config)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "").withConfig(rw.config)
	bob := newCLI(db.Login(t, "bob", "expiryctl_approver").URL, "").withConfig(rw.config)

	// A queue River does not know is refused as a RabbitMQ queue that
	// does not exist is, not captured as an empty one.
	typo := ingester.exits(t, 3, "dlq", "ingest", "--queue", strings.TrimSuffix(queue, "expiry")+"expirey")
	if !strings.Contains(typo.stderr, `did you mean "expiry"?`) {
		t.Errorf("a mistyped River queue: %s", typo)
	}
	captureTwice(t, ingester, queue, n)
	// The test reaches River's database as a superuser, which the capture
	// says, as it says it of the archive's login.
	if again := ingester.ok(t, "dlq", "ingest", "--queue", queue); !strings.Contains(again.stderr, `warning: connection "river" logs in as postgres (superuser)`) {
		t.Errorf("a capture through a superuser's connection says nothing of it: %s", again)
	}
	if after := digest(); after != before {
		t.Error("capture changed River's jobs")
	}

	var listed []listedLetter
	decodeJSON(t, alice.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	if len(listed) != n {
		t.Fatalf("%d letters archived for %d discarded jobs", len(listed), n)
	}
	letterOf := map[string]int64{}
	var ids []string
	for _, l := range listed {
		var shown jobShown
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(l.ID, 10), "-o", "json"), &shown)
		if shown.System != "river" || shown.SourceQueue != name || shown.Native["kind"] != "reservation_expiry" {
			t.Errorf("letter %d: system %q, queue %q, kind %q", l.ID, shown.System, shown.SourceQueue, shown.Native["kind"])
		}
		if shown.Category != "transient-exhausted" || shown.Attempts != 2 || len(shown.AttemptHistory) != 2 ||
			shown.AttemptHistory[1].Attempt != 2 || !strings.Contains(shown.AttemptHistory[1].Error, "deadlock detected") {
			t.Errorf("letter %d: %s after %d attempts, history %+v", l.ID, shown.Category, shown.Attempts, shown.AttemptHistory)
		}
		var args riverExpiry
		if err := json.Unmarshal(shown.Payload, &args); err != nil || shown.IdempotencyKey != args.IdempotencyKey {
			t.Errorf("letter %d: payload %q (%v), idempotency key %q", l.ID, shown.Payload, err, shown.IdempotencyKey)
		}
		letterOf[shown.Native["job_id"]] = l.ID
		ids = append(ids, "--id", strconv.FormatInt(l.ID, 10))
	}
	// The summary's live states are River's own: the discarded jobs wait
	// there, isolated, and none is ready.
	checkIsolated(t, alice, name, n)
	show := alice.ok(t, "dlq", "show", strconv.FormatInt(letterOf[strconv.FormatInt(jobs[0], 10)], 10))
	if !strings.Contains(show.stdout, "retried in place (River job") {
		t.Errorf("dlq show does not say where the job replays to:\n%s", show.stdout)
	}

	// Refused: a River job goes back as itself, nowhere else.
	refusal := alice.exits(t, 4, append(append([]string{"replay", "request"}, ids...), "--routing-key", "reservation-expiry",
		"--same-handler-ok", "River shows no workers", "--why", "INC-4410")...)
	if !strings.Contains(refusal.stderr, "target") {
		t.Errorf("a River replay to a queue of alice's choosing: %s", refusal)
	}

	var req struct {
		ID    int64 `json:"id"`
		Items int   `json:"items"`
	}
	decodeJSON(t, alice.ok(t, append(append([]string{"replay", "request"}, ids...),
		"--same-handler-ok", "River shows no workers: the fix is deployed", "--why", "INC-4410: the reservations database deadlocked",
		"--canary", "0", "-o", "json")...), &req)
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")

	// Someone else retries job 1 through River, and the fixed worker runs it.
	w.succeed.Store(true)
	if _, err := client.JobRetry(ctx, jobs[1]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the job retried elsewhere to complete", func() bool { return w.runsAfter(jobs[1]) == 1 })

	// The run sees the poisoned job discarded again: one of the three it
	// retried, above the policy's re-dead ratio of 0.2, halts it.
	run := alice.exits(t, 8, "replay", "run", id, "-o", "json")
	var summary replaySummary
	decodeJSON(t, run, &summary)
	if summary.Status != "halted" || summary.HaltCondition != "redead-ratio" || summary.Confirmed != n-1 || summary.Skipped != 1 {
		t.Errorf("replay run %d: %+v, want halted by the re-dead ratio with %d confirmed and the job retried elsewhere skipped", req.ID, summary, n-1)
	}
	state, why := replayItem(t, db, req.ID, letterOf[strconv.FormatInt(jobs[1], 10)])
	if state != "skipped" || !strings.Contains(why, "no longer the failed job captured") {
		t.Errorf("the job retried elsewhere: item %s (%q), want skipped saying why", state, why)
	}

	waitFor(t, 30*time.Second, "the replayed jobs to run", func() bool {
		return riverStates()["completed"] == n-1 && riverStates()["discarded"] == 1
	})
	// A moment more, for a second run of any job to show.
	time.Sleep(300 * time.Millisecond)
	for i, job := range jobs {
		if got := w.runsAfter(job); got != 1 && i != 3 {
			t.Errorf("job %d (r-river-%d) ran %d times after the fix, want once", job, i, got)
		}
	}
	// The poisoned job had one more attempt (River's JobRetry adds one)
	// and failed again: a new letter, linked to the first and the replay.
	if got := w.runsAfter(jobs[3]); got != 1 {
		t.Errorf("the poisoned job ran %d times after the replay, want once", got)
	}
	ingester.ok(t, "dlq", "ingest", "--queue", queue)
	var again struct {
		PreviousID      *int64 `json:"previous_id"`
		ReplayRequestID *int64 `json:"replay_request_id"`
	}
	newest := newestLetter(t, db, n+1)
	decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(newest, 10), "-o", "json"), &again)
	first := letterOf[strconv.FormatInt(jobs[3], 10)]
	if again.PreviousID == nil || *again.PreviousID != first || again.ReplayRequestID == nil || *again.ReplayRequestID != req.ID {
		t.Errorf("the job that failed again: letter %d, previous %v, request %v; want linked to letter %d and request %d",
			newest, again.PreviousID, again.ReplayRequestID, first, req.ID)
	}
}
