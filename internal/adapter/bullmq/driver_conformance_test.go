package bullmq_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/adapter/driver/drivertest"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// TestDriverConformance holds the BullMQ driver to the suite every
// driver passes, on a queue of the test's own whose jobs a real BullMQ
// Worker failed.
func TestDriverConformance(t *testing.T) {
	bullmqtest.RequireNode(t)
	drivertest.Run(t, bullmq.Driver)
	drivertest.RunJobStore(t, func(t *testing.T) drivertest.JobStoreHarness {
		q := bullmqtest.NewQueue(t)
		w := bullmqtest.StartWorker(t, q)
		conn := config.Connection{Name: "redis-test", System: bullmq.System, URLs: []string{fmt.Sprintf("redis://%s/%d", q.Ref.Addr(), q.Ref.DB)}}
		prefix := url.PathEscape(q.Ref.Prefix)
		return drivertest.JobStoreHarness{
			Driver: bullmq.Driver, Connection: conn,
			Queue: prefix + "/" + url.PathEscape(q.Ref.Queue), Missing: prefix + "/no-such-queue",
			URL: q.URL(),
			Fail: func(t *testing.T, n int) {
				payloads := make([][]byte, n)
				for i := range payloads {
					payloads[i] = fmt.Appendf(nil, `{"reservation_id":"r-%d"}`, i)
				}
				failWithBullMQ(t, q, w, payloads)
			},
		}
	})
}
