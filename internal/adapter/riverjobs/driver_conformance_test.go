package riverjobs_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/driver/drivertest"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

// TestDriverConformance holds the River driver to the suite every
// driver passes, on a River database of the test's own.
func TestDriverConformance(t *testing.T) {
	drivertest.Run(t, riverjobs.Driver)
	drivertest.RunJobStore(t, func(t *testing.T) drivertest.JobStoreHarness {
		db := newRiverDB(t)
		db.worked(t, "expiry")
		u, err := url.Parse(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		conn := config.Connection{Name: "river-test", System: riverjobs.System,
			URLs: []string{fmt.Sprintf("postgres://%s@%s%s?sslmode=disable", u.User.Username(), u.Host, u.Path)}}
		return drivertest.JobStoreHarness{
			Driver: riverjobs.Driver, Connection: conn, Queue: "expiry", Missing: "no-such-queue",
			URL: fmt.Sprintf("river://%s@%s%s/expiry?sslmode=disable", u.User.Username(), u.Host, u.Path),
			Fail: func(t *testing.T, n int) {
				base := time.Now().Add(-time.Minute)
				for i := range n {
					db.seed(t, failedJob{Args: fmt.Sprintf(`{"reservation_id":"r-%d"}`, i), FinalizedAt: base.Add(time.Duration(i) * time.Millisecond)})
				}
			},
		}
	})
}
