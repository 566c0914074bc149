package riverjobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestRetrierConformance holds the River retrier to the suite every
// job-store target passes.
func TestRetrierConformance(t *testing.T) {
	brokertest.RunJobStore(t, func(t *testing.T) brokertest.JobStoreHarness {
		db := newRiverDB(t)
		// A River client works the queue: the run's target exists
		// before any job failed there.
		db.worked(t, "expiry")
		ref := db.ref(t, "expiry")
		return brokertest.JobStoreHarness{
			Broker:       openRetrier(t, ref),
			System:       riverjobs.System,
			Queue:        ref.Name(),
			MissingQueue: db.ref(t, "never_used").Name(),
			Fail: func(t *testing.T, payload []byte) replay.JobRef {
				id := db.seed(t, failedJob{Args: string(payload), FinalizedAt: time.Now().Add(-time.Minute)})
				var at time.Time
				if err := db.Pool.QueryRow(context.Background(), "SELECT finalized_at FROM river_job WHERE id = $1", id).Scan(&at); err != nil {
					t.Fatal(err)
				}
				return replay.JobRef{ID: idText(id), Incarnation: riverjobs.Incarnation(at)}
			},
			State: func(t *testing.T, id string) string {
				return db.job(t, id).State
			},
			Waiting: "available",
			Marks: func(t *testing.T, id string) map[string]any {
				var marks map[string]any
				if err := json.Unmarshal([]byte(db.job(t, id).Marks), &marks); err != nil {
					t.Fatal(err)
				}
				return marks
			},
			Remove: func(t *testing.T, id string) {
				exec(t, db, "DELETE FROM river_job WHERE id = $1", parseID(t, id))
			},
			RetryElsewhere: func(t *testing.T, id string) {
				client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := client.JobRetry(context.Background(), parseID(t, id)); err != nil {
					t.Fatal(err)
				}
			},
			Runs: func(t *testing.T, id string) int {
				var attempt int
				if err := db.Pool.QueryRow(context.Background(), "SELECT attempt FROM river_job WHERE id = $1", parseID(t, id)).Scan(&attempt); err != nil {
					t.Fatal(err)
				}
				return attempt
			},
		}
	})
}
