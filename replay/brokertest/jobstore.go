package brokertest

import (
	"context"
	"errors"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// JobStoreHarness is one job-store driver on one test's
// own queue. A replay there retries the failed job where it is, only
// while the store still holds the failure the letter captured, and writes
// the replay's marks on it in the same step.
type JobStoreHarness struct {
	Broker replay.Broker
	// System is the driver's system, which the runner names on each
	// message.
	System deadletter.System
	// Queue names the test's queue as QueueDepth takes it and as a
	// replay.Message's RoutingKey gives it; MissingQueue one that holds
	// no job and was never used.
	Queue, MissingQueue string
	// Fail makes a job that fails for good and returns it as a replay
	// names it: its id and the incarnation capture read.
	Fail func(t *testing.T, payload []byte) replay.JobRef
	// State says where the job with id is now, in the store's words;
	// Waiting is what it says of a job ready to run again.
	State   func(t *testing.T, id string) string
	Waiting string
	// Marks reads the replay marks written on the job (nil: none).
	Marks func(t *testing.T, id string) map[string]any
	// Remove deletes the job; RetryElsewhere retries it the store's own
	// way, as someone else than expiryctl would.
	Remove, RetryElsewhere func(t *testing.T, id string)
	// Runs counts how many times the store has handed the job to a
	// worker since it was made (the store's attempt count,
	// attemptsStarted), for telling one retry from two.
	Runs func(t *testing.T, id string) int
}

// retryOf is the message a replay publishes for item to retry job.
func retryOf(h JobStoreHarness, job replay.JobRef, request, item int64) replay.Message {
	return replay.Message{
		System:     h.System,
		Item:       item,
		RoutingKey: h.Queue,
		Job:        job,
		Headers: map[string]any{
			replay.HeaderReplayRequest: request,
			replay.HeaderReplayCount:   int64(1),
			replay.HeaderReplayItem:    item,
			replay.HeaderReplayedBy:    "alice",
			replay.HeaderApprovedBy:    "bob",
		},
	}
}

// RunJobStore runs every job-store case against setup's harness, each on
// a fresh queue.
func RunJobStore(t *testing.T, setup func(t *testing.T) JobStoreHarness) {
	t.Run("RetryPutsTheJobBackWithTheReplaysMarks", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-1"}`))
		before, _, err := h.Broker.QueueDepth(context.Background(), h.Queue)
		if err != nil {
			t.Fatalf("QueueDepth: %v", err)
		}
		if err := retryOutcome(t, h.Broker, retryOf(h, job, 7, 41)); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if got := h.State(t, job.ID); got != h.Waiting {
			t.Errorf("after the retry the job is %q, want %q", got, h.Waiting)
		}
		marks := h.Marks(t, job.ID)
		if asInt(marks[replay.HeaderReplayRequest]) != 7 || asInt(marks[replay.HeaderReplayItem]) != 41 {
			t.Errorf("marks on the job = %v; want request 7, item 41", marks)
		}
		after, exists, err := h.Broker.QueueDepth(context.Background(), h.Queue)
		if err != nil || !exists || after != before+1 {
			t.Errorf("QueueDepth after the retry = %d, %v, %v; want %d, true", after, exists, err, before+1)
		}
	})

	t.Run("APublishRepeatedForTheSameItemRetriesOnce", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-2"}`))
		runs := h.Runs(t, job.ID)
		for i := range 3 {
			if err := retryOutcome(t, h.Broker, retryOf(h, job, 8, 42)); err != nil {
				t.Fatalf("publish %d of the same item: %v", i+1, err)
			}
		}
		if got := h.Runs(t, job.ID); got != runs {
			t.Errorf("runs changed from %d to %d before any worker took it", runs, got)
		}
		depth, _, err := h.Broker.QueueDepth(context.Background(), h.Queue)
		if err != nil || depth != 1 {
			t.Errorf("QueueDepth after three publishes of one item = %d, %v; want 1", depth, err)
		}
	})

	t.Run("AnotherRequestsRetryOfARetriedJobIsSkipped", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-3"}`))
		if err := retryOutcome(t, h.Broker, retryOf(h, job, 9, 43)); err != nil {
			t.Fatalf("first retry: %v", err)
		}
		wantMovedOn(t, retryOutcome(t, h.Broker, retryOf(h, job, 10, 43)))
	})

	t.Run("AJobRemovedIsSkipped", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-4"}`))
		h.Remove(t, job.ID)
		wantMovedOn(t, retryOutcome(t, h.Broker, retryOf(h, job, 11, 44)))
	})

	t.Run("AJobRetriedElsewhereIsSkipped", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-5"}`))
		h.RetryElsewhere(t, job.ID)
		wantMovedOn(t, retryOutcome(t, h.Broker, retryOf(h, job, 12, 45)))
		if marks := h.Marks(t, job.ID); marks != nil {
			t.Errorf("a skipped job got marks %v", marks)
		}
	})

	t.Run("AStaleIncarnationIsSkipped", func(t *testing.T) {
		h := setup(t)
		job := h.Fail(t, []byte(`{"reservation_id":"r-6"}`))
		stale := job
		stale.Incarnation += "0"
		wantMovedOn(t, retryOutcome(t, h.Broker, retryOf(h, stale, 13, 46)))
		if got := h.State(t, job.ID); got == h.Waiting {
			t.Error("a job whose incarnation did not match was retried")
		}
	})

	t.Run("QueueDepthOfAnUnusedQueue", func(t *testing.T) {
		h := setup(t)
		depth, _, err := h.Broker.QueueDepth(context.Background(), h.MissingQueue)
		if err != nil || depth != 0 {
			t.Errorf("QueueDepth of a queue with no jobs = %d, %v; want 0, nil", depth, err)
		}
		if _, ok := h.Broker.(replay.Routes); ok {
			t.Errorf("%T names routes: a job store retries each job in its own queue, through none", h.Broker)
		}
	})
}

// retryOutcome publishes m and waits for its answer.
func retryOutcome(t *testing.T, b replay.Broker, m replay.Message) error {
	t.Helper()
	p, err := b.Publish(context.Background(), m)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return outcome(t, p)
}

func wantMovedOn(t *testing.T, err error) {
	t.Helper()
	var moved *replay.JobMovedOnError
	if !errors.As(err, &moved) {
		t.Fatalf("outcome %v; want a *replay.JobMovedOnError", err)
	}
	if moved.Now == "" {
		t.Error("the refusal does not say what the job is now")
	}
}

// asInt reads a mark that came back through JSON or as written.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return -1
}
