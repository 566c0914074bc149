package jobtable_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

// TestSourceConformance holds the jobs table source to the suite every
// job-store source passes, on a table whose payload column is bytea (the
// suite's payloads include one that is not JSON, which jsonb cannot
// hold), read as the login GrantSQL's statements make and nothing more.
func TestSourceConformance(t *testing.T) {
	sourcetest.RunJobStore(t, func(t *testing.T) sourcetest.JobStoreHarness {
		db := newJobsDB(t, "bytea")
		return sourcetest.JobStoreHarness{
			Fail: func(t *testing.T, payloads [][]byte) []string {
				ids := make([]string, len(payloads))
				base := time.Now().Add(-time.Minute)
				for i, p := range payloads {
					ids[i] = db.insert(t, job{Payload: p, FailedAt: base.Add(time.Duration(i) * time.Millisecond)})
				}
				return ids
			},
			FailAgain: func(t *testing.T, id string) {
				// As the team's poller records a retry's run that failed.
				db.exec(t, `UPDATE public.reservation_expiry_jobs SET attempt_count = attempt_count + 1,
					last_error = 'db_timeout again', failed_at = now(), run_at = now() WHERE id = $1::bigint`, id)
			},
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				return openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{Prefetch: prefetch})
			},
			Digest: func(t *testing.T) string { return db.digest(t) },
		}
	})
}
