package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/expiryctl/expiryctl/deadletter"
)

// A run watches its own outcomes (issue 32): a job it replays that fails
// again comes back to a dead-letter queue, and the re-dead stop condition
// counts it only once it is captured into the archive. So a replay's run
// captures the dead-letter queues its cohort came from itself, from before
// its start until its watch window after the last publish closes, beside
// any `dlq ingest --follow` (consumers of one queue share it, and each
// letter is stored once). The database lets an operator capture those
// queues only while their run holds its lease (replay_run_captures), and
// refuses to start a run that captures none of them (rule dlq-unwatched)
// unless its request says why it need not (UnwatchedWhy).

// WatchOwed is what a run owes its watch as it starts or resumes: a run
// resumed after a crash is the same run, so the items its earlier legs
// confirmed under the approval count in its re-dead ratio, their jobs
// that came back count against them, and the watch window after its last
// confirm, if it is still open, is watched out before it completes.
type WatchOwed struct {
	// Confirmed are the items confirmed under the current approval;
	// CameBack those of their jobs captured again.
	Confirmed, CameBack int
	// WindowLeft is what is left of the watch window after the last of
	// them was confirmed, by the database's clock.
	WindowLeft time.Duration
}

// WatchedQueue is a dead-letter queue a replay's cohort came from and how
// its run watches it: By "run" when the run captures it, or Unwatched
// saying why it cannot.
type WatchedQueue struct {
	Queue     string `json:"queue"`
	By        string `json:"by,omitempty"`
	Unwatched string `json:"unwatched,omitempty"`
}

// OpenDLQ opens a consumer on a dead-letter queue for a run's capture: an
// error wrapped in *deadletter.Unavailable is a server that is down, waited
// out once the capture runs; any other (the queue does not exist) means
// the queue cannot be watched.
type OpenDLQ func(ctx context.Context, queue string) (deadletter.ClosableSource, error)

// dlqWatch is a run's captures of its cohort's dead-letter queues.
type dlqWatch struct {
	queues []WatchedQueue
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// noCapture is why a runner without OpenDLQ watches no queue.
const noCapture = "this runner has no connection to capture it with"

// watchDLQs starts capturing each of queues that r can open, until stop.
// A runner without OpenDLQ watches none.
func (r *Runner) watchDLQs(ctx context.Context, queues []string) *dlqWatch {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &dlqWatch{cancel: cancel}
	for _, q := range queues {
		if r.OpenDLQ == nil {
			w.queues = append(w.queues, WatchedQueue{Queue: q, Unwatched: noCapture})
			continue
		}
		src, err := r.OpenDLQ(ctx, q)
		if err != nil {
			w.queues = append(w.queues, WatchedQueue{Queue: q, Unwatched: truncateWords(err.Error(), 500)})
			continue
		}
		w.queues = append(w.queues, WatchedQueue{Queue: q, By: "run"})
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.capture(ctx, r, q, src)
		}()
	}
	return w
}

// capture runs one queue's capture until ctx is done, through outages of
// the queue system and PostgreSQL as `dlq ingest --follow` does; an error no wait
// cures is kept for the run to stop on.
func (w *dlqWatch) capture(ctx context.Context, r *Runner, queue string, src deadletter.ClosableSource) {
	opts := deadletter.IngestOptions{Actor: r.Actor, Queue: queue, Connection: r.Connection, Follow: true}
	_, last, err := deadletter.IngestFollowing(ctx, src, opts, deadletter.FollowOptions{
		Ingest: func(ctx context.Context, src deadletter.Source, opts deadletter.IngestOptions) (deadletter.IngestStats, error) {
			return deadletter.Ingest(ctx, r.Pool, src, opts)
		},
		Open:    func(ctx context.Context) (deadletter.ClosableSource, error) { return r.OpenDLQ(ctx, queue) },
		Backoff: dlqCaptureWaits,
	})
	if last != nil {
		_ = last.Close()
	}
	if err != nil && ctx.Err() == nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("the run stopped capturing dead-letter queue %s, so it can no longer see its jobs die again: %w", queue, err)
		}
		w.mu.Unlock()
	}
}

// dlqCaptureWaits are the waits of a run's capture through an outage:
// from a quarter second up to five, with jitter, for as long as it lasts.
func dlqCaptureWaits() retry.Backoff {
	return retry.WithJitterPercent(20, retry.WithCappedDuration(5*time.Second, retry.NewExponential(250*time.Millisecond)))
}

// failed is the first capture's error that no wait cures; nil while all
// go on, and for a nil watch.
func (w *dlqWatch) failed() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// stop ends the captures: each commits and acknowledges the batch it is
// writing and leaves the one it collects for the broker to deliver again.
func (w *dlqWatch) stop() {
	if w == nil {
		return
	}
	w.cancel()
	w.wg.Wait()
}

// watched is every queue and how it is watched; nil for a nil watch (a
// discard's run, which publishes nothing).
func (w *dlqWatch) watched() []WatchedQueue {
	if w == nil {
		return nil
	}
	return append([]WatchedQueue{}, w.queues...)
}

// observation is what replay_run_start judges, {"queues": watched}; nil
// for a nil watch.
func (w *dlqWatch) observation() ([]byte, error) {
	if w == nil {
		return nil, nil
	}
	return json.Marshal(map[string]any{"queues": w.watched()})
}
