package worker

import (
	"fmt"
	"time"
)

// Jitter chooses how a retry delay is randomised around its exponential
// value, so that a burst of jobs failing together does not retry together.
type Jitter int

const (
	// EqualJitter waits half the exponential delay plus a random part of the
	// other half: retries spread out but never come back at once.
	EqualJitter Jitter = iota
	// FullJitter waits a random part of the whole exponential delay: the
	// widest spread, at the price of some near-immediate retries.
	FullJitter
	// NoJitter waits exactly the exponential delay; for tests.
	NoJitter
	// SpreadJitter waits the exponential delay less a random part of it, at
	// most Spread of it: retries spread out, and none waits longer than its
	// delay nor much shorter. The seed's policy is a spread of a fifth.
	SpreadJitter
)

// Backoff is a capped exponential retry delay: Base after the first failure,
// doubling after each further one, never above Max, then jittered.
type Backoff struct {
	// Base is the delay after the first failure, before jitter.
	Base time.Duration
	// Max caps the exponential growth, before jitter.
	Max time.Duration
	// Jitter spreads retries; the zero value is EqualJitter.
	Jitter Jitter
	// Spread is SpreadJitter's largest part of a delay taken off, from 0
	// to 1.
	Spread float64
}

// DefaultBackoff is the seed's policy: 5 s after the first failure,
// doubling up to 15 minutes, each wait shortened by up to a fifth. With the
// default budget of 7 attempts, a job spends 5+10+20+40+80+160 s, about 5
// minutes, retrying before it is dead-lettered.
var DefaultBackoff = Backoff{Base: 5 * time.Second, Max: 15 * time.Minute, Jitter: SpreadJitter, Spread: 0.2}

// Validate says what is wrong with a backoff someone configured.
func (b Backoff) Validate() error {
	switch {
	case b.Base <= 0 || b.Max < b.Base:
		return fmt.Errorf("backoff base %s and cap %s: the base must be positive and the cap at least the base", b.Base, b.Max)
	case b.Spread < 0 || b.Spread > 1:
		return fmt.Errorf("backoff jitter %.2f: use a fraction from 0 to 1, e.g. 0.2", b.Spread)
	}
	return nil
}

// Delay is the wait after the given number of failed attempts (1 for the
// first), with r in [0, 1) as the random draw.
func (b Backoff) Delay(failures int, r float64) time.Duration {
	d := b.Base
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	switch b.Jitter {
	case FullJitter:
		d = time.Duration(r * float64(d))
	case EqualJitter:
		d = d/2 + time.Duration(r*float64(d/2))
	case SpreadJitter:
		d -= time.Duration(r * b.Spread * float64(d))
	}
	// A zero per-message expiration would skip the wait entirely.
	return max(d, time.Millisecond)
}
