package pgboss_test

import (
	"testing"

	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// TestSourceConformance holds the pg-boss source to the suite every
// job-store source passes, on jobs a real pg-boss sent and failed.
func TestSourceConformance(t *testing.T) {
	sourcetest.RunJobStore(t, func(t *testing.T) sourcetest.JobStoreHarness {
		db, b := pgbosstest.New(t, "expiry", nil)
		ref := db.Ref(t, "expiry")
		return sourcetest.JobStoreHarness{
			Fail: func(t *testing.T, payloads [][]byte) []string { return b.FailJobs(payloads...) },
			// pg-boss's own retry, and its worker failing the job again.
			FailAgain: func(t *testing.T, id string) {
				b.Retry(id)
				b.FailNext(id)
			},
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				return openSource(t, ref, pgboss.SourceOptions{Prefetch: prefetch})
			},
			Digest: func(t *testing.T) string { return db.TableDigest(t) },
			Stored: b.Stored,
		}
	})
}
