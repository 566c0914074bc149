package replay

import "slices"

// Readings are a run's stop conditions as it last judged them, for a
// progress display that must agree with the halt it may show beside them:
// the numbers here are the ones the checks compared with the request's
// limits, counted the way the checks count them (this run's publishes, this
// run's confirms), not recomputed by the display.
type Readings struct {
	// Checked is false until the first check read the servers: before it
	// the queue depth and the re-dead count are unknown, not zero.
	Checked bool `json:"checked"`
	// Attempted counts this run's publishes that got the broker's answer
	// and FailedRun those that failed; FailureRatio is their ratio, as the
	// failure-ratio condition judges it.
	Attempted    int     `json:"attempted"`
	FailedRun    int     `json:"failed_this_run"`
	FailureRatio float64 `json:"failure_ratio"`
	// QueueDepth is the deepest target queue at the last check and
	// DepthQueue its name; empty when no target queue was read yet.
	QueueDepth int    `json:"queue_depth"`
	DepthQueue string `json:"depth_queue,omitempty"`
	// ConfirmedRun counts the items this run confirmed (under this
	// approval: a run resumed after a crash is the same run), Redead those
	// of their jobs captured again, and RedeadRatio the first over the
	// second, as the redead-ratio condition judges it.
	Redead       int     `json:"redead"`
	ConfirmedRun int     `json:"confirmed_this_run"`
	RedeadRatio  float64 `json:"redead_ratio"`
	// Canary is where the request's canary stands: "" (the request has
	// none), "pending" (not published yet), "publishing", "waiting" (out,
	// its window running), "passed", "failed" (the run halted before it
	// passed) or "stopped" (the run stopped before it passed; a resume
	// goes on with it).
	Canary string `json:"canary,omitempty"`
	// CanarySent counts the canary's publishes by this run: fewer than the
	// request's canary when the run halted while the canary went out, or
	// the cohort had fewer letters left to send. Zero when this run sent
	// none (an earlier run sent them).
	CanarySent int `json:"canary_sent,omitempty"`
	// Halted names the stop condition that halted the run; empty while it
	// runs and when it ended otherwise.
	Halted string `json:"halted,omitempty"`
}

// The canary states of Readings.Canary.
const (
	CanaryPending    = "pending"
	CanaryPublishing = "publishing"
	CanaryWaiting    = "waiting"
	CanaryPassed     = "passed"
	CanaryFailed     = "failed"
	CanaryStopped    = "stopped"
)

// readProbe keeps what a check read, before it is judged: a display shows
// the numbers that led to a halt too.
func (st *runState) readProbe(p probe) {
	if p.err != nil || p.status != StatusRunning {
		return
	}
	st.readings.Checked = true
	st.readings.Redead = p.redead - st.redeadBase
	st.readings.QueueDepth, st.readings.DepthQueue = 0, ""
	for _, d := range p.depths {
		if st.readings.DepthQueue == "" || d.depth > st.readings.QueueDepth {
			st.readings.QueueDepth, st.readings.DepthQueue = d.depth, d.queue
		}
	}
}

// readRedead keeps the re-dead count of the check at the end of a run.
func (st *runState) readRedead(n int) {
	st.readings.Checked = true
	st.readings.Redead = n - st.redeadBase
}

// currentReadings are the readings with this run's counts as they stand.
func (st *runState) currentReadings(phase string) Readings {
	r := st.readings
	r.Attempted, r.FailedRun, r.ConfirmedRun = st.attempted, st.failedRun, st.confirmedRun
	r.FailureRatio, r.RedeadRatio = 0, 0
	if r.Attempted > 0 {
		r.FailureRatio = float64(r.FailedRun) / float64(r.Attempted)
	}
	if r.ConfirmedRun > 0 {
		r.RedeadRatio = float64(r.Redead) / float64(r.ConfirmedRun)
	}
	r.Canary, r.CanarySent = st.canaryState(phase), st.canarySent
	if st.status == StatusHalted {
		r.Halted = st.haltCondition
	}
	return r
}

// canaryState is where the canary stands in phase.
func (st *runState) canaryState(phase string) string {
	switch {
	case st.req.Canary <= 0 || st.req.Kind != KindReplay:
		return ""
	case st.canaryPassed:
		return CanaryPassed
	case st.status == StatusHalted:
		// Nothing beyond the canary goes out before it passes, so a halt
		// before the pass is the canary's.
		return CanaryFailed
	case phase == "canary":
		return CanaryPublishing
	case slices.Contains([]string{"canary-wait", "canary-outcomes"}, phase):
		return CanaryWaiting
	case phase == "stopping":
		return CanaryStopped
	}
	return CanaryPending
}
