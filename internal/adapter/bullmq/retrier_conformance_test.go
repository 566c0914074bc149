package bullmq_test

import (
	"strconv"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestRetrierConformance holds the retrier to the suite every job-store
// target passes, with each BullMQ release it supports. A real BullMQ
// Worker fails each job and is gone before the retry, so the job stays
// waiting; someone else's retry is BullMQ's own Job.retry() from a Queue
// with no Worker.
func TestRetrierConformance(t *testing.T) {
	bullmqtest.RequireNode(t)
	for _, p := range bullmqtest.Packages {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			retrierConformance(t, p)
		})
	}
}

func retrierConformance(t *testing.T, p bullmqtest.Package) {
	brokertest.RunJobStore(t, func(t *testing.T) brokertest.JobStoreHarness {
		q := bullmqtest.NewQueueFor(t, p)
		missing := bullmqtest.NewQueue(t)
		var queue *bullmqtest.Worker
		return brokertest.JobStoreHarness{
			Broker: newRetrier(t, q), System: bullmq.System, Queue: q.Ref.Name(), MissingQueue: missing.Ref.Name(),
			Fail: func(t *testing.T, payload []byte) replay.JobRef {
				w := bullmqtest.StartWorker(t, q)
				id := failWithBullMQ(t, q, w, [][]byte{payload})[0]
				w.Quit()
				m := captured(t, q, 1)[id]
				return replay.JobRef{ID: id, Incarnation: m.Native[deadletter.NativeIncarnation]}
			},
			State:   func(t *testing.T, id string) string { return q.State(t, id) },
			Waiting: "waiting",
			Marks: func(t *testing.T, id string) map[string]any {
				return bullmq.Marks(q.Hash(t, id))
			},
			Remove: func(t *testing.T, id string) {
				if queue == nil {
					queue = bullmqtest.StartQueue(t, q)
				}
				queue.Remove(id)
			},
			RetryElsewhere: func(t *testing.T, id string) {
				if queue == nil {
					queue = bullmqtest.StartQueue(t, q)
				}
				queue.Retry(id)
			},
			Runs: func(t *testing.T, id string) int {
				n, _ := strconv.Atoi(q.Hash(t, id)["ats"])
				return n
			},
		}
	})
}
