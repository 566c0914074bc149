package bullmq_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// TestSourceConformance holds the BullMQ source to the suite every
// job-store source passes, with jobs a real BullMQ Worker of each release
// the driver supports failed.
func TestSourceConformance(t *testing.T) {
	bullmqtest.RequireNode(t)
	for _, p := range bullmqtest.Packages {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			sourceConformance(t, p)
		})
	}
}

func sourceConformance(t *testing.T, p bullmqtest.Package) {
	sourcetest.RunJobStore(t, func(t *testing.T) sourcetest.JobStoreHarness {
		q := bullmqtest.NewQueueFor(t, p)
		w := bullmqtest.StartWorker(t, q)
		return sourcetest.JobStoreHarness{
			Fail:      func(t *testing.T, payloads [][]byte) []string { return failWithBullMQ(t, q, w, payloads) },
			FailAgain: func(t *testing.T, id string) { failAgainWithBullMQ(t, q, w, id) },
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				src, err := bullmq.OpenSource(t.Context(), q.Client, q.Ref, bullmq.SourceOptions{Prefetch: prefetch, Poll: 20 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				return src
			},
			// The live worker's stalled-job check writes its own keys.
			Digest: func(t *testing.T) string { return q.Digest(t, "stalled-check", "stalled") },
		}
	})
}
