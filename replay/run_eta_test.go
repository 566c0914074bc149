package replay

import (
	"testing"
	"time"
)

// Through the canary's wait the ETA counts down with the window, and the
// rate stays the rate the run published at; after it, the ETA is the
// items left at that rate, not at a rate diluted by the wait.
func TestETACountsDownThroughTheCanaryWait(t *testing.T) {
	t.Parallel()
	t0 := runEpoch
	now := t0
	var seen []Progress
	r := &Runner{Now: func() time.Time { return now }, Progress: func(p Progress) { seen = append(seen, p) }}
	st := &runState{req: Request{ID: 7, Kind: KindReplay, Items: 40, Rate: 4}, start: t0}

	steps := []struct {
		at         time.Duration
		phase      string
		canaryLeft time.Duration
	}{
		{500 * time.Millisecond, "canary", 0},
		{time.Second, "canary-wait", 30 * time.Second},
		{6 * time.Second, "canary-wait", 25 * time.Second},
		{11 * time.Second, "canary-wait", 20 * time.Second},
		{31 * time.Second, "replay", 0},
	}
	for _, s := range steps {
		now = t0.Add(s.at)
		st.published, st.confirmed, st.canaryLeft = 3, 3, s.canaryLeft
		r.report(st, s.phase)
	}
	if len(seen) != len(steps) {
		t.Fatalf("%d reports, want %d", len(seen), len(steps))
	}
	// 3 published in the second before the wait, the first at once: 2/s,
	// 37 items left (at half a second, 4/s, the request's ceiling).
	const rate = 2.0
	publishing := 37 * time.Second / rate
	for i, want := range []time.Duration{37 * time.Second / 4, 30*time.Second + publishing, 25*time.Second + publishing, 20*time.Second + publishing, publishing} {
		p := seen[i]
		if p.ETA != want {
			t.Errorf("report %d (%s, %s): ETA %s, want %s", i, p.Phase, steps[i].at, p.ETA, want)
		}
		if i > 0 && p.Rate != rate {
			t.Errorf("report %d (%s): rate %.2f/s, want the %.1f/s the run published at", i, p.Phase, p.Rate, rate)
		}
	}
	for i := 2; i < 4; i++ {
		if seen[i].ETA >= seen[i-1].ETA {
			t.Errorf("the ETA grew during the canary wait: %s then %s", seen[i-1].ETA, seen[i].ETA)
		}
	}
}

func TestEstimateETA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		left     int
		rate     float64
		pace     float64
		waitLeft time.Duration
		want     time.Duration
	}{
		{"at the measured rate", 100, 10, 20, 0, 10 * time.Second},
		{"never faster than the pace", 100, 400, 20, 0, 5 * time.Second},
		{"at the pace before any rate is measured", 100, 0, 20, 0, 5 * time.Second},
		{"the wait left comes first", 100, 10, 20, 30 * time.Second, 40 * time.Second},
		{"nothing left but the wait", 0, 10, 20, 12 * time.Second, 12 * time.Second},
		{"no rate and no pace: unknown", 100, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		if got := estimateETA(tt.left, tt.rate, tt.pace, tt.waitLeft); got != tt.want {
			t.Errorf("%s: estimateETA(%d, %g, %g, %s) = %s, want %s", tt.name, tt.left, tt.rate, tt.pace, tt.waitLeft, got, tt.want)
		}
	}
}

func TestRunWaits(t *testing.T) {
	t.Parallel()
	t0 := runEpoch
	var w runWaits
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w.observe("canary", at(0), 0)
	w.observe("canary-wait", at(1), 3)
	if got := w.total(at(4)); got != 3*time.Second {
		t.Errorf("3s into the wait: total %s", got)
	}
	w.observe("canary-outcomes", at(5), 3) // still waiting
	w.observe("replay", at(6), 3)
	w.observe("replay", at(9), 10)
	if got := w.total(at(10)); got != 5*time.Second {
		t.Errorf("after a 5s wait: total %s", got)
	}
	w.observe("settling", at(12), 20)
	if got := w.total(at(13)); got != 6*time.Second {
		t.Errorf("1s into settling: total %s", got)
	}
	if got := w.stretches(20); got != 2 {
		t.Errorf("a canary and the rest: %d stretches of publishing, want 2", got)
	}
	if got := publishRate(11, 1, 1, 10*time.Second, 5*time.Second); got != 2 {
		t.Errorf("11 published in 5s of publishing: %g/s", got)
	}
	if got := publishRate(0, 0, 1, 10*time.Second, 0); got != 0 {
		t.Errorf("nothing published: %g/s", got)
	}
}

// TestAverageRateNeverPassesTheCeiling: a run held to 5/s by a limiter
// with a burst of one, its canary of 3 and its 3 other letters 0.2 s
// apart around a 30 s canary window, averages 5/s, not the 7.5/s that
// counting every publish as an interval made of it.
func TestAverageRateNeverPassesTheCeiling(t *testing.T) {
	t.Parallel()
	var w runWaits
	at := func(s float64) time.Time { return runEpoch.Add(time.Duration(s * float64(time.Second))) }
	w.observe("canary", at(0), 1)
	w.observe("canary-wait", at(0.4), 3)
	w.observe("replay", at(30.4), 4)
	const ceiling = 5
	got := publishRate(6, w.stretches(6), burstFor(ceiling), 30800*time.Millisecond, w.total(at(30.8)))
	if got > ceiling || got < ceiling-0.01 {
		t.Errorf("average %g/s, want %d/s: the run published at its ceiling", got, ceiling)
	}
}
