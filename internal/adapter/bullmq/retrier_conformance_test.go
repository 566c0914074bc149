package bullmq_test

import (
	"strconv"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestRetrierConformance holds the retrier to the suite every job-store
// target passes. A real BullMQ Worker fails each job and is gone before
// the retry, so the job stays waiting; someone else's retry is BullMQ's
// own Job.retry() from a Queue with no Worker.
func TestRetrierConformance(t *testing.T) {
	nodeDir(t)
	brokertest.RunJobStore(t, func(t *testing.T) brokertest.JobStoreHarness {
		q := newQueue(t)
		missing := newQueue(t)
		var queue *nodeWorker
		return brokertest.JobStoreHarness{
			Broker: newRetrier(t), System: deadletter.BullMQ, Queue: q.ref.Name(), MissingQueue: missing.ref.Name(),
			Fail: func(t *testing.T, payload []byte) replay.JobRef {
				w := startWorker(t, q)
				id := failWithBullMQ(t, q, w, [][]byte{payload})[0]
				w.send(map[string]any{"cmd": "quit"})
				w.await("closed", "")
				m := captured(t, q, 1)[id]
				return replay.JobRef{ID: id, Incarnation: m.Native[deadletter.NativeIncarnation]}
			},
			State:   func(t *testing.T, id string) string { return q.state(t, id) },
			Waiting: "waiting",
			Marks: func(t *testing.T, id string) map[string]any {
				return bullmq.Marks(q.hash(t, id))
			},
			Remove: func(t *testing.T, id string) {
				if queue == nil {
					queue = startQueue(t, q)
				}
				queue.send(map[string]any{"cmd": "remove", "id": id})
				queue.await("removed", id)
			},
			RetryElsewhere: func(t *testing.T, id string) {
				if queue == nil {
					queue = startQueue(t, q)
				}
				queue.send(map[string]any{"cmd": "retry", "id": id})
				queue.await("retried", id)
			},
			Runs: func(t *testing.T, id string) int {
				n, _ := strconv.Atoi(q.hash(t, id)["ats"])
				return n
			},
		}
	})
}
