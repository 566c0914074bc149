package jobtable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/driver/drivertest"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

// TestDriverConformance holds the jobs-table driver to the suite every
// driver passes, on a table of the test's own read as the login
// GrantSQL's statements make, through the mapping a second person
// approved (driver.Env.Approved).
func TestDriverConformance(t *testing.T) {
	drivertest.Run(t, jobtable.Driver)
	drivertest.RunJobStore(t, func(t *testing.T) drivertest.JobStoreHarness {
		db := newJobsDB(t, "jsonb")
		u, err := url.Parse(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		conn := config.Connection{Name: testConnection, System: jobtable.System, URLs: []string{db.URL}}
		missing := db.Mapping
		missing.Table = "public.no_such_jobs"
		approved := map[string]json.RawMessage{}
		for _, m := range []jobtable.Mapping{db.Mapping, missing} {
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			approved["jobtable://"+testConnection+"/"+m.Table] = raw
		}
		return drivertest.JobStoreHarness{
			Driver: jobtable.Driver, Connection: conn, Queue: db.Mapping.Table, Missing: missing.Table,
			URL: fmt.Sprintf("jobtable://%s@%s%s/%s", u.User.Username(), u.Host, u.Path, db.Mapping.Table),
			Env: driver.Env{Approved: func(context.Context) (map[string]json.RawMessage, error) { return approved, nil }},
			Fail: func(t *testing.T, n int) {
				base := time.Now().Add(-time.Minute)
				for i := range n {
					db.insert(t, job{FailedAt: base.Add(time.Duration(i) * time.Millisecond)})
				}
			},
		}
	})
}
