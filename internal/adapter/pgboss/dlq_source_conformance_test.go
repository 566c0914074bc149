package pgboss_test

import (
	"testing"

	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
)

// TestSourceConformance holds the pg-boss source to the suite every
// job-store source passes, on jobs a real pg-boss sent and failed.
func TestSourceConformance(t *testing.T) {
	sourcetest.RunJobStore(t, func(t *testing.T) sourcetest.JobStoreHarness {
		db, b := newBossDB(t, "expiry", nil)
		ref := db.ref(t, "expiry")
		return sourcetest.JobStoreHarness{
			Fail: func(t *testing.T, payloads [][]byte) []string { return b.failNow(payloads...) },
			// pg-boss's own retry, and its worker failing the job again.
			FailAgain: func(t *testing.T, id string) {
				b.retry(id)
				b.failNext(id)
			},
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				return openSource(t, ref, pgboss.SourceOptions{Prefetch: prefetch})
			},
			Digest: func(t *testing.T) string { return db.tableDigest(t) },
			Stored: b.stored,
		}
	})
}
