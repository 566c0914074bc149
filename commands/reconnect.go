package commands

import (
	"time"

	"github.com/sethvargo/go-retry"
)

// reconnectWaits is the schedule of waits of a command that outlives a
// server (`dlq ingest --follow` reconnecting, `metrics serve` reading
// again): half a second at first, doubling up to 20 s, each wait drawn
// within ±50 % of that, so that several processes that lost the same
// server do not all come back at the same instant. A restart of a few
// seconds is noticed within a second of its end; an outage of hours
// costs one try every 10 to 30 seconds.
func reconnectWaits() retry.Backoff {
	return retry.WithJitterPercent(50, retry.WithCappedDuration(20*time.Second, retry.NewExponential(500*time.Millisecond)))
}
