package riverjobs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// expiryArgs is the contract's expiry job as a River job.
type expiryArgs struct {
	ReservationID  string `json:"reservation_id"`
	IdempotencyKey string `json:"idempotency_key"`
}

func (expiryArgs) Kind() string { return "reservation_expiry" }

// flakyWorker fails every job until told to succeed, and a poisoned
// reservation always; it panics on odd attempts, so River records a
// trace, and returns an error on even ones. It counts its runs per job.
type flakyWorker struct {
	river.WorkerDefaults[expiryArgs]
	succeed atomic.Bool
	poison  string

	mu   sync.Mutex
	runs map[int64]int
}

func (w *flakyWorker) Work(_ context.Context, job *river.Job[expiryArgs]) error {
	w.mu.Lock()
	w.runs[job.ID]++
	w.mu.Unlock()
	if w.succeed.Load() && job.Args.ReservationID != w.poison {
		return nil
	}
	if job.Attempt%2 == 1 {
		panic(fmt.Sprintf("db_timeout: expiring %s", job.Args.ReservationID))
	}
	return fmt.Errorf("db_timeout: expiring %s", job.Args.ReservationID)
}

func (w *flakyWorker) runsOf(id int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[id]
}

// soonRetry retries a failed attempt at once, so that River makes the job
// available again without waiting for its scheduler.
type soonRetry struct{}

func (soonRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(10 * time.Millisecond) }

// startRiver starts a River client that works queue "expiry" with w.
func startRiver(t *testing.T, db *riverDB, w *flakyWorker) *river.Client[pgxTx] {
	t.Helper()
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Queues:            map[string]river.QueueConfig{"expiry": {MaxWorkers: 4}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		RetryPolicy:       soonRetry{},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return client
}

// waitStates waits until every job of ids is in state.
func (db *riverDB) waitStates(t *testing.T, state string, ids ...int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE id = ANY($1) AND state::text = $2",
			ids, state).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs reached %s", n, len(ids), state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRiverWorkerRunsEachReplayedJobOnce(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	w := &flakyWorker{runs: map[int64]int{}, poison: "r-0"}
	client := startRiver(t, db, w)
	ref := db.ref(t, "expiry")
	src := openSource(t, ref, openFollow())

	const n = 5
	ids := make([]int64, n)
	for i := range n {
		res, err := client.Insert(context.Background(), expiryArgs{ReservationID: fmt.Sprintf("r-%d", i),
			IdempotencyKey: fmt.Sprintf("expire:r-%d:v1", i)}, &river.InsertOpts{Queue: "expiry", MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.Job.ID
	}
	db.waitStates(t, "discarded", ids...)

	captured := receive(t, src, n)
	if err := src.Acknowledge(captured[n-1].Tag); err != nil {
		t.Fatal(err)
	}
	byID := map[string]deadletter.Delivery{}
	for _, d := range captured {
		byID[d.Message.MessageID] = d
		l := deadletter.Parse(d.Message, deadletter.DefaultClassifier(), time.Now())
		if l.Attempts != 2 || len(l.AttemptHistory) != 2 || l.AttemptHistory[0].Trace == "" || l.AttemptHistory[1].Trace != "" {
			t.Errorf("job %s: attempts %d, history %+v; want 2 attempts, a trace for the panic only", d.Message.MessageID, l.Attempts, l.AttemptHistory)
		}
		if l.ReservationID == "" || l.IdempotencyKey == "" {
			t.Errorf("job %s: the contract's fields did not parse from %s", d.Message.MessageID, d.Message.Body)
		}
	}

	w.succeed.Store(true)
	r := openRetrier(t, ref)
	for i, id := range ids {
		if err := publish(t, r, replayOf(byID[strconv.FormatInt(id, 10)], 42, int64(i+1))); err != nil {
			t.Fatalf("replay job %d: %v", id, err)
		}
	}
	db.waitStates(t, "completed", ids[1:]...)

	// The poisoned job dies again: a new incarnation of the same job,
	// carrying the replay's marks.
	again := receive(t, src, 1)[0]
	first := byID[again.Message.MessageID]
	if again.Message.MessageID != strconv.FormatInt(ids[0], 10) ||
		again.Message.Native[deadletter.NativeIncarnation] == first.Message.Native[deadletter.NativeIncarnation] {
		t.Fatalf("dead again: job %s@%s; want job %d, a new incarnation", again.Message.MessageID,
			again.Message.Native[deadletter.NativeIncarnation], ids[0])
	}
	l := deadletter.Parse(again.Message, deadletter.DefaultClassifier(), time.Now())
	if l.ReplayRequestID == nil || *l.ReplayRequestID != 42 || l.Attempts != 3 || again.Message.Headers[replay.HeaderReplayItem] != int64(1) {
		t.Errorf("dead again: replay request %v, attempts %d, headers %v", l.ReplayRequestID, l.Attempts, again.Message.Headers)
	}

	// A resumed run publishes every item again: nothing runs again.
	for i, id := range ids {
		if err := publish(t, r, replayOf(byID[strconv.FormatInt(id, 10)], 42, int64(i+1))); err != nil {
			t.Errorf("replay job %d again: %v", id, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, id := range ids {
		if got := w.runsOf(id); got != 3 {
			t.Errorf("job %d ran %d times; want 2 failures and exactly one replay", id, got)
		}
	}
	db.waitStates(t, "completed", ids[1:]...)
	db.waitStates(t, "discarded", ids[0])
}
