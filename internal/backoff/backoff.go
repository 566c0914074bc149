// Package backoff spaces the retries of a process that waits for a server
// to come back: `dlq ingest --follow` reconnecting, `metrics serve`
// reading again.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is how long to wait before each retry: Initial, doubled after each
// failed try up to Max, each wait drawn at random from its upper half, so
// that several processes that lost the same server do not come back in
// step and the server is not hit by all of them at the same instant.
type Policy struct {
	Initial, Max time.Duration
	// Rand returns a number in [0, 1) (default math/rand/v2's Float64).
	Rand func() float64
}

// Default starts at half a second and stays under 30 seconds: a broker or
// database restart of a few seconds is noticed within a second of its end,
// and an outage of hours costs one try every 15 to 30 seconds.
var Default = Policy{Initial: 500 * time.Millisecond, Max: 30 * time.Second}

// Wait is the wait before try n after a failure (1 for the first retry).
func (p Policy) Wait(n int) time.Duration {
	if p.Initial <= 0 {
		p.Initial = Default.Initial
	}
	if p.Max < p.Initial {
		p.Max = max(p.Initial, Default.Max)
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d/2 + time.Duration(p.Rand()*float64(d/2))
}
