package pgboss_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/driver/drivertest"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// TestDriverConformance holds the pg-boss driver to the suite every
// driver passes, on a pg-boss database of the test's own.
func TestDriverConformance(t *testing.T) {
	drivertest.Run(t, pgboss.Driver)
	drivertest.RunJobStore(t, func(t *testing.T) drivertest.JobStoreHarness {
		db, b := pgbosstest.New(t, "expiry", nil)
		u, err := url.Parse(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		conn := config.Connection{Name: "pgboss-test", System: pgboss.System,
			URLs: []string{fmt.Sprintf("postgres://%s@%s%s?sslmode=disable", u.User.Username(), u.Host, u.Path)}}
		return drivertest.JobStoreHarness{
			Driver: pgboss.Driver, Connection: conn, Queue: "expiry", Missing: "no-such-queue",
			URL:  fmt.Sprintf("pgboss://%s@%s%s/expiry?sslmode=disable", u.User.Username(), u.Host, u.Path),
			Fail: func(t *testing.T, n int) { b.FailJobs(reservations(0, n)...) },
		}
	})
}
