package replay

import "math"

// The arithmetic of recovery traffic. A job that fails transiently is
// tried again, up to n further times, so the consumers see more attempts
// than jobs arrive: for an arrival rate R and a transient failure fraction
// p, each job is attempted 1 + p + p² + … + pⁿ times on average, and
// (1+n) times at most, when every attempt but the last fails.

// Amplification is the attempts per job that the planning model expects:
// (1 − p^(n+1)) / (1 − p), the sum of the geometric series 1 + p + … + pⁿ.
// It is 1 for p ≤ 0 (nothing is retried) and n+1 for p ≥ 1 (everything is),
// where the closed form would divide by zero. A negative n counts as 0.
func Amplification(p float64, n int) float64 {
	n = max(n, 0)
	switch {
	case p <= 0:
		return 1
	case p >= 1:
		return float64(n + 1)
	}
	return (1 - math.Pow(p, float64(n+1))) / (1 - p)
}

// UpperBound is the most attempts per second that arrivals at rate r can
// offer the consumers with n further attempts each: r·(1+n), every
// attempt but the last failing.
func UpperBound(r float64, n int) float64 { return r * float64(1+max(n, 0)) }

// PlanningBound is the attempts per second the planning model expects
// arrivals at rate r to offer, with transient failure fraction p and n
// further attempts: r·(1 − p^(n+1))/(1 − p).
func PlanningBound(r, p float64, n int) float64 { return r * Amplification(p, n) }

// What bounds a suggested replay rate.
const (
	// LimitedByHeadroom: the consumers' ack rate, less the live load.
	LimitedByHeadroom = "headroom"
	// LimitedByCeiling: the request's approved rate ceiling.
	LimitedByCeiling = "ceiling"
	// LimitedByNoHeadroom: the live load alone reaches the ack rate.
	LimitedByNoHeadroom = "no-headroom"
)

// SuggestRate is the highest replay rate, at most ceiling, whose traffic
// together with the live arrivals keeps the offered load at or under
// ackRate: the largest x ≤ ceiling with (arrivals + x)·amplification ≤
// ackRate, rounded down to a hundredth. It says which bound decided:
// LimitedByHeadroom, LimitedByCeiling, or LimitedByNoHeadroom (x is 0: the
// live load alone already offers the consumers all they ack). A replayed
// job is retried like any other, so its traffic is amplified the same way.
// An amplification below 1 is taken as 1.
func SuggestRate(arrivals, amplification, ackRate, ceiling float64) (rate float64, limitedBy string) {
	amplification = max(amplification, 1)
	room := ackRate/amplification - arrivals
	switch {
	case room <= 0:
		return 0, LimitedByNoHeadroom
	case room >= ceiling:
		return ceiling, LimitedByCeiling
	}
	return math.Floor(room*100) / 100, LimitedByHeadroom
}
