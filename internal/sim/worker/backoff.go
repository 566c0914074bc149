package worker

import "time"

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
}

// DefaultBackoff waits about 1 s, 2 s, 4 s, 8 s … up to one minute, with equal
// jitter; with the default budget of 5 attempts a job spends about 15 s
// retrying before it is dead-lettered.
var DefaultBackoff = Backoff{Base: time.Second, Max: time.Minute, Jitter: EqualJitter}

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
	}
	// A zero per-message expiration would skip the wait entirely.
	return max(d, time.Millisecond)
}
