package riverjobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

// TestSourceConformance holds the River source to the suite every
// job-store source passes.
func TestSourceConformance(t *testing.T) {
	sourcetest.RunJobStore(t, func(t *testing.T) sourcetest.JobStoreHarness {
		db := newRiverDB(t)
		// A River client works the queue: a capture may follow it
		// before any job failed there.
		db.worked(t, "expiry")
		ref := db.ref(t, "expiry")
		return sourcetest.JobStoreHarness{
			Fail: func(t *testing.T, payloads [][]byte) []string {
				ids := make([]string, len(payloads))
				base := time.Now().Add(-time.Minute)
				for i, p := range payloads {
					ids[i] = idText(db.seed(t, failedJob{Args: string(p), FinalizedAt: base.Add(time.Duration(i) * time.Millisecond)}))
				}
				return ids
			},
			FailAgain: func(t *testing.T, id string) {
				client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := client.JobRetry(context.Background(), parseID(t, id)); err != nil {
					t.Fatal(err)
				}
				// As River's completer records a last attempt that failed.
				exec(t, db, `UPDATE river_job SET state = 'discarded', attempt = attempt + 1, finalized_at = now(),
					errors = errors || jsonb_build_object('at', now(), 'attempt', attempt + 1, 'error', 'db_timeout again', 'trace', '')
					WHERE id = $1`, parseID(t, id))
			},
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				return openSource(t, ref, riverjobs.SourceOptions{Prefetch: prefetch, Poll: 20 * time.Millisecond})
			},
			Digest: func(t *testing.T) string { return db.tableDigest(t) },
			// River keeps args as jsonb, which holds no input bytes: a
			// payload comes back in jsonb's text form, and one that is
			// not JSON cannot be a River job at all.
			Stored: func(payload []byte) ([]byte, bool) {
				if !json.Valid(payload) {
					return nil, false
				}
				var kept []byte
				if err := db.Pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(payload)).Scan(&kept); err != nil {
					t.Fatal(err)
				}
				return kept, true
			},
		}
	})
}
