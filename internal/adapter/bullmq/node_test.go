package bullmq_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/replay"
)

// eachBullMQ runs test once with each BullMQ release the driver supports
// (bullmqtest.Packages), in parallel, as a subtest named after its
// package, on a queue of its own whose Workers are that release's.
func eachBullMQ(t *testing.T, test func(t *testing.T, q bullmqtest.Queue)) {
	t.Helper()
	for _, p := range bullmqtest.Packages {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			test(t, bullmqtest.NewQueueFor(t, p))
		})
	}
}

// TestNodeBullMQReplay runs a real BullMQ Queue and Worker (bullmq 5 and 6
// from e2e/node, pinned) on both ends of a capture and its replay. The worker
// fails every job (attempts: 2) until told to succeed; the source
// captures each with what BullMQ kept; the retrier retries three of the
// four, twice each as a resumed run would; the worker then completes
// each of the three exactly once, as an ordinary retry: its run's
// finishedOn and failedReason gone, its attempts and traces kept, and
// BullMQ's opts (LIFO, priority) as they were. The fourth stays failed.
func TestNodeBullMQReplay(t *testing.T) {
	t.Parallel()
	eachBullMQ(t, testNodeBullMQReplay)
}

func testNodeBullMQReplay(t *testing.T, q bullmqtest.Queue) {
	w := bullmqtest.StartWorker(t, q)
	added := w.Add(
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-1", "idempotency_key": "expire:r-1:v3"}, "opts": map[string]any{"attempts": 2}},
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-2"}, "opts": map[string]any{"attempts": 2, "lifo": true}},
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-3"}, "opts": map[string]any{"attempts": 2, "priority": 4}},
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-4"}, "opts": map[string]any{"attempts": 2}},
	)
	q.WaitFailed(t, 4)
	if n := len(w.Seen("failing")); n != 8 {
		t.Errorf("the worker ran %d failing attempts, want 8 (4 jobs, 2 attempts each)", n)
	}

	// The live worker's stalled-job check writes its own keys meanwhile.
	before := q.Digest(t, "stalled-check", "stalled")
	jobs := captured(t, q, 4)
	if q.Digest(t, "stalled-check", "stalled") != before {
		t.Error("capture changed Redis")
	}
	for i, id := range added {
		m := jobs[id]
		var data map[string]any
		if err := json.Unmarshal(m.Body, &data); err != nil || data["reservation_id"] != "r-"+strconv.Itoa(i+1) {
			t.Errorf("job %s: body %q", id, m.Body)
		}
		reason := "db_timeout: reservation r-" + strconv.Itoa(i+1) + " lock wait exceeded"
		if m.Type != "expire" || m.Headers["x-attempt"] != int64(2) || m.Native[deadletter.NativeMaxAttempts] != "2" ||
			m.Headers["x-last-error"] != reason || m.Native["attemptsStarted"] != "2" || m.Native[bullmq.NativeVersion] != q.BullMQ.Version {
			t.Errorf("job %s: %+v", id, m)
		}
		history, _ := m.Headers["x-attempt-history"].([]any)
		if len(history) != 2 {
			t.Fatalf("job %s: history %v", id, m.Headers["x-attempt-history"])
		}
		for n, h := range history {
			e := h.(map[string]any)
			if e["attempt"] != int64(n+1) || e["error"] != "Error: "+reason || !strings.Contains(e["trace"].(string), "bullmq_worker.js") {
				t.Errorf("job %s attempt %d: %v", id, n+1, e)
			}
		}
		l := deadletter.Parse(m, deadletter.DefaultClassifier(), time.Now())
		if l.Category != "transient-exhausted" {
			t.Errorf("job %s: category %q", id, l.Category)
		}
	}
	if !strings.Contains(jobs[added[1]].Native["opts"], `"lifo":true`) || jobs[added[2]].Native["priority"] != "4" {
		t.Errorf("opts %q, priority %q", jobs[added[1]].Native["opts"], jobs[added[2]].Native["priority"])
	}

	w.Succeed()
	r := newRetrier(t, q)
	replayed := added[:3]
	for range 2 { // the second time as a run resumed after a crash
		for i, id := range replayed {
			if err := publish(t, r, replayOf(jobs[id], 31, int64(i+1))); err != nil {
				t.Fatalf("retry %s: %v", id, err)
			}
		}
	}
	w.WaitSeen("completed", replayed...)
	time.Sleep(time.Second) // long enough to see a second run
	completed := map[string]int{}
	for _, e := range w.Seen("completed") {
		completed[e.ID]++
		if e.FailedReason != nil || e.FinishedOn != nil {
			t.Errorf("job %s ran with failedReason %v, finishedOn %v: a retry resets them", e.ID, e.FailedReason, e.FinishedOn)
		}
		if e.AttemptsMade != 2 || e.AttemptsStarted != 3 || e.Stacktrace != 2 {
			t.Errorf("job %s ran as attempt made %d, started %d, with %d traces; want 2, 3, 2, as Job.retry() leaves them", e.ID, e.AttemptsMade, e.AttemptsStarted, e.Stacktrace)
		}
		failedAt, _ := strconv.ParseInt(jobs[e.ID].Native["finishedOn"], 10, 64)
		if e.ProcessedOn == nil || *e.ProcessedOn < failedAt {
			t.Errorf("job %s ran with processedOn %v, before it failed at %d", e.ID, e.ProcessedOn, failedAt)
		}
	}
	want := map[string]int{replayed[0]: 1, replayed[1]: 1, replayed[2]: 1}
	if !maps.Equal(completed, want) {
		t.Errorf("the worker completed %v, want each replayed job once: %v", completed, want)
	}
	if ids := q.Client.ZRange(t.Context(), q.Key("failed"), 0, -1).Val(); !slices.Equal(ids, []string{added[3]}) {
		t.Errorf("failed set %v, want only the job not replayed", ids)
	}
	for i, id := range replayed {
		h := q.Hash(t, id)
		if !strings.Contains(h[bullmq.MarkField], `"x-replay-item":`+strconv.Itoa(i+1)) {
			t.Errorf("job %s after completion: marks %q", id, h[bullmq.MarkField])
		}
	}
	counts, err := q.Ref.Counts(t.Context(), q.Client)
	if err != nil || counts.Completed != 3 || counts.Failed != 1 || !counts.Exists {
		t.Errorf("Counts = %+v, %v", counts, err)
	}
	workers, err := q.Ref.Workers(t.Context(), q.Client)
	if err != nil || len(workers) == 0 {
		t.Errorf("Workers = %v, %v, want the node worker", workers, err)
	}
	w.Quit()
}

// TestNodeJobMovedOnBetweenCaptureAndReplay: a job BullMQ itself removed
// (Job.remove) or retried (Job.retry, after which the failing worker
// fails it again) since its capture is not retried; the new failure is a
// new letter, which is.
func TestNodeJobMovedOnBetweenCaptureAndReplay(t *testing.T) {
	t.Parallel()
	eachBullMQ(t, testNodeJobMovedOn)
}

func testNodeJobMovedOn(t *testing.T, q bullmqtest.Queue) {
	w := bullmqtest.StartWorker(t, q)
	added := w.Add(
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-1"}, "opts": map[string]any{"attempts": 2}},
		map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-2"}, "opts": map[string]any{"attempts": 2}},
	)
	q.WaitFailed(t, 2)
	jobs := captured(t, q, 2)

	w.Remove(added[0])
	w.Retry(added[1])

	r := newRetrier(t, q)
	var moved *replay.JobMovedOnError
	if err := publish(t, r, replayOf(jobs[added[0]], 5, 1)); !errors.As(err, &moved) || moved.Now != "deleted" {
		t.Errorf("a removed job: %v, want moved on (deleted)", err)
	}
	if err := publish(t, r, replayOf(jobs[added[1]], 5, 2)); !errors.As(err, &moved) {
		t.Errorf("a job BullMQ retried: %v, want moved on", err)
	} else {
		t.Logf("retried by BullMQ: %v", err)
	}

	// The retried job fails once more (its budget is spent): a new
	// incarnation, captured as a new letter and retried.
	deadline := time.Now().Add(10 * time.Second)
	for q.Hash(t, added[1])["atm"] != "3" || q.Client.ZScore(t.Context(), q.Key("failed"), added[1]).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not fail again: %v", added[1], q.Hash(t, added[1]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	again := captured(t, q, 1)[added[1]]
	if again.Native[deadletter.NativeIncarnation] == jobs[added[1]].Native[deadletter.NativeIncarnation] || again.Headers["x-attempt"] != int64(3) {
		t.Errorf("the new failure: incarnation %q, attempt %v", again.Native[deadletter.NativeIncarnation], again.Headers["x-attempt"])
	}
	if len(again.Headers["x-attempt-history"].([]any)) != 3 {
		t.Errorf("history %v, want the three attempts", again.Headers["x-attempt-history"])
	}
	w.Succeed()
	if err := publish(t, r, replayOf(again, 6, 3)); err != nil {
		t.Fatalf("the new letter: %v", err)
	}
	w.WaitSeen("completed", added[1])
}

// TestNodeRetryIntoAPausedQueue: a job retried while its queue is paused
// waits where the queue's own release keeps a paused queue's jobs
// (BullMQ 5's paused list, 6's wait), with no marker, and its Worker runs
// it once the queue is resumed: a retry written for the other release
// would strand it or run it at once.
func TestNodeRetryIntoAPausedQueue(t *testing.T) {
	t.Parallel()
	eachBullMQ(t, func(t *testing.T, q bullmqtest.Queue) {
		w := bullmqtest.StartWorker(t, q)
		id := w.Add(map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-1"}, "opts": map[string]any{"attempts": 1}})[0]
		q.WaitFailed(t, 1)
		job := captured(t, q, 1)[id]
		w.Pause()
		w.Succeed()
		if err := publish(t, newRetrier(t, q), replayOf(job, 9, 1)); err != nil {
			t.Fatal(err)
		}
		list := map[string]string{"bullmq": "paused", "bullmq6": "wait"}[q.BullMQ.Name]
		if got := q.Client.LRange(t.Context(), q.Key(list), 0, -1).Val(); !slices.Equal(got, []string{id}) {
			t.Errorf("%s list = %v, want the job: where %s keeps a paused queue's jobs", list, got, q.BullMQ.Version)
		}
		if q.Client.Exists(t.Context(), q.Key("marker")).Val() != 0 {
			t.Error("a marker on a paused queue")
		}
		time.Sleep(300 * time.Millisecond) // long enough for a paused Worker to run it wrongly
		if n := len(w.Seen("completed")); n != 0 {
			t.Fatalf("the Worker ran %d jobs of a paused queue", n)
		}
		w.Resume()
		w.WaitSeen("completed", id)
	})
}

// TestSeedIsBullMQsShape holds the tests' seed to a job a real BullMQ
// Worker failed, in each release: the same hash fields, so what the
// seeded tests prove about reading and retrying holds for BullMQ's own
// jobs; and the driver's tested versions to what each release writes in
// meta.
func TestSeedIsBullMQsShape(t *testing.T) {
	t.Parallel()
	eachBullMQ(t, func(t *testing.T, real bullmqtest.Queue) {
		w := bullmqtest.StartWorker(t, real)
		id := w.Add(map[string]any{"name": "expire", "data": map[string]any{"reservation_id": "r-1"}, "opts": map[string]any{"attempts": 2}})[0]
		real.WaitFailed(t, 1)
		seeded := bullmqtest.NewQueue(t)
		seed(t, seeded, real.BullMQ.Version, failedJob{ID: "1"})
		got, want := slices.Sorted(maps.Keys(seeded.Hash(t, "1"))), slices.Sorted(maps.Keys(real.Hash(t, id)))
		if !slices.Equal(got, want) {
			t.Errorf("seeded job fields %v, BullMQ's %v", got, want)
		}
		meta := real.Client.HGetAll(t.Context(), real.Key("meta")).Val()
		if meta["version"] != real.BullMQ.Version || !slices.Contains(bullmq.TestedVersions, meta["version"]) {
			t.Errorf("BullMQ (%s) wrote version %q, the driver is tested as %q of %q", real.BullMQ.Name, meta["version"], real.BullMQ.Version, bullmq.TestedVersions)
		}
	})
}
