package replay

import "time"

// waitingPhase reports whether a run in phase publishes nothing by design:
// it waits out the canary window or for the outcomes of what it sent.
func waitingPhase(phase string) bool {
	switch phase {
	case "canary-wait", "canary-outcomes", "settling", "not-before", "watching":
		return true
	}
	return false
}

// runWaits adds up the time a run spent in its waiting phases, so that its
// rate is the rate it publishes at: counted over the whole run, a canary
// window of a minute would make a run that publishes 20 a second look like
// one that publishes 0.3, and its ETA grow through the window instead of
// counting down.
type runWaits struct {
	waited time.Duration
	// since is when the current wait began; zero while not waiting.
	since time.Time
	// ended counts the stretches of publishing that a wait ended, and
	// publishedAt is the count published when the last of them ended.
	ended, publishedAt int
}

// observe notes the run's phase at now, with published so far.
func (w *runWaits) observe(phase string, now time.Time, published int) {
	switch waiting := waitingPhase(phase); {
	case waiting && w.since.IsZero():
		w.since = now
		if published > w.publishedAt {
			w.ended, w.publishedAt = w.ended+1, published
		}
	case !waiting && !w.since.IsZero():
		w.waited += now.Sub(w.since)
		w.since = time.Time{}
	}
}

// stretches counts the stretches of publishing so far, given published:
// those a wait ended, and the current one if it published anything.
func (w *runWaits) stretches(published int) int {
	if published > w.publishedAt {
		return w.ended + 1
	}
	return w.ended
}

// total is the time spent waiting up to now.
func (w *runWaits) total(now time.Time) time.Duration {
	if w.since.IsZero() {
		return w.waited
	}
	return w.waited + now.Sub(w.since)
}

// publishRate is the rate of published over the time the run could
// publish: elapsed less its waits. Each of the stretches of publishing
// between waits starts with a burst that takes no time (the limiter's
// burst, one publish at least): k publishes span k-burst intervals, not k,
// so those are left out, or a canary of 3 and 3 more at 5/s would read
// 7.5/s against a ceiling of 5/s. Zero until it is known.
func publishRate(published, stretches, burst int, elapsed, waited time.Duration) float64 {
	publishing := (elapsed - waited).Seconds()
	timed := published - stretches*burst
	if timed <= 0 || publishing <= 0 {
		return 0
	}
	return float64(timed) / publishing
}

// estimateETA is the time a run needs for left items: waitLeft, what is
// left of a wait of known length (the canary window), then the items at
// the rate it publishes at, never faster than pace, the rate it allows
// itself (a few canary publishes can measure far above it), and at pace
// while it has not measured a rate. Zero when it cannot tell.
func estimateETA(left int, rate, pace float64, waitLeft time.Duration) time.Duration {
	if left <= 0 {
		return waitLeft
	}
	if pace > 0 && (rate <= 0 || rate > pace) {
		rate = pace
	}
	if rate <= 0 {
		return 0
	}
	return waitLeft + time.Duration(float64(left)/rate*float64(time.Second))
}
