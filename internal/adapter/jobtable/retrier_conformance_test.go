package jobtable_test

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestRetrierConformance holds the Retrier to the suite every job-store
// broker passes, on the contract's jsonb payloads, as the login
// GrantSQL's statements make and nothing more. A job's incarnation is
// what a Source captures, not a value the test computes.
func TestRetrierConformance(t *testing.T) {
	brokertest.RunJobStore(t, func(t *testing.T) brokertest.JobStoreHarness {
		db := newJobsDB(t, "jsonb")
		r := openRetrier(t, db.URL, db.Mapping)
		queue := r.QueueName()
		return brokertest.JobStoreHarness{
			Broker:       r,
			System:       jobtable.System,
			Queue:        queue,
			MissingQueue: queue[:strings.LastIndex(queue, "/")] + "/public.no_such_jobs",
			Fail: func(t *testing.T, payload []byte) replay.JobRef {
				id := db.insert(t, job{Payload: payload})
				m, ok := capture(t, db, 1)[id]
				if !ok {
					t.Fatalf("capture did not deliver job %s", id)
				}
				return replayOf(m, 0, 0).Job
			},
			State:   func(t *testing.T, id string) string { return db.row(t, id).Status },
			Waiting: "pending",
			Marks:   func(t *testing.T, id string) map[string]any { return db.row(t, id).Marks },
			Remove: func(t *testing.T, id string) {
				db.exec(t, `DELETE FROM public.reservation_expiry_jobs WHERE id = $1::bigint`, id)
			},
			RetryElsewhere: func(t *testing.T, id string) {
				// The team's own retry: back to pending, due now.
				db.exec(t, `UPDATE public.reservation_expiry_jobs SET status = 'pending', run_at = now() WHERE id = $1::bigint`, id)
			},
			Runs: func(t *testing.T, id string) int { return db.row(t, id).Attempts },
		}
	})
}
