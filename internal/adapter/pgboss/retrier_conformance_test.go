package pgboss_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestRetrierConformance holds the pg-boss retrier to the suite every
// job-store target passes, on jobs a real pg-boss sent and failed, and
// retried or deleted where the suite has someone else do so. No worker
// polls the queue: what a retry puts back stays there to be counted.
func TestRetrierConformance(t *testing.T) {
	brokertest.RunJobStore(t, func(t *testing.T) brokertest.JobStoreHarness {
		db, b := pgbosstest.New(t, "expiry", nil)
		ref := db.Ref(t, "expiry")
		return brokertest.JobStoreHarness{
			Broker:       openRetrier(t, ref),
			System:       pgboss.System,
			Queue:        ref.Name(),
			MissingQueue: db.Ref(t, "never_used").Name(),
			Fail: func(t *testing.T, payload []byte) replay.JobRef {
				id := b.FailJobs(payload)[0]
				s := db.Job(t, "expiry", id)
				return replay.JobRef{ID: id, Incarnation: pgboss.Incarnation(*s.CompletedOn)}
			},
			State:   func(t *testing.T, id string) string { return db.Job(t, "expiry", id).State },
			Waiting: "retry",
			Marks: func(t *testing.T, id string) map[string]any {
				var marks map[string]any
				if err := json.Unmarshal([]byte(db.Job(t, "expiry", id).Marks), &marks); err != nil {
					t.Fatal(err)
				}
				return marks
			},
			Remove:         func(t *testing.T, id string) { b.DeleteJob(id) },
			RetryElsewhere: func(t *testing.T, id string) { b.Retry(id) },
			// Each fetch after the first adds one to retry_count.
			Runs: func(t *testing.T, id string) int {
				s := db.Job(t, "expiry", id)
				if !s.Started {
					return 0
				}
				return s.RetryCount + 1
			},
		}
	})
}

func openRetrier(tb testing.TB, ref pgboss.Ref) *pgboss.Retrier {
	tb.Helper()
	r, err := pgboss.OpenRetrier(context.Background(), ref, pgboss.RetrierOptions{})
	if err != nil {
		tb.Fatalf("OpenRetrier: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r
}
