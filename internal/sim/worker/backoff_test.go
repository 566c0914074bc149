package worker_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	tests := []struct {
		name     string
		backoff  worker.Backoff
		failures int
		r        float64
		want     time.Duration
	}{
		{"first retry waits base", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.NoJitter}, 1, 0.5, 100 * ms},
		{"doubles", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.NoJitter}, 3, 0.5, 400 * ms},
		{"capped", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.NoJitter}, 60, 0.5, time.Second},
		{"equal jitter low", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.EqualJitter}, 2, 0, 100 * ms},
		{"equal jitter high", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.EqualJitter}, 2, 0.999999, 199 * ms},
		{"full jitter", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.FullJitter}, 2, 0.25, 50 * ms},
		{"full jitter never zero", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.FullJitter}, 2, 0, ms},
		{"spread jitter at most a fifth off", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.SpreadJitter, Spread: 0.2}, 2, 0.999999, 160 * ms},
		{"spread jitter none off", worker.Backoff{Base: 100 * ms, Max: time.Second, Jitter: worker.SpreadJitter, Spread: 0.2}, 2, 0, 200 * ms},
	}
	for _, tt := range tests {
		got := tt.backoff.Delay(tt.failures, tt.r)
		if got.Truncate(ms) != tt.want {
			t.Errorf("%s: Delay(%d, %v) = %v, want %v", tt.name, tt.failures, tt.r, got, tt.want)
		}
	}
}

// TestDefaultBackoffIsTheSeedsPolicy: 5 s base, doubling, a 15-minute cap,
// at most a fifth taken off, 7 attempts; and the default retry tiers reach
// the cap, so no delay is cut short.
func TestDefaultBackoffIsTheSeedsPolicy(t *testing.T) {
	t.Parallel()
	b := worker.DefaultBackoff
	want := 5 * time.Second
	for failures := 1; failures <= 12; failures++ {
		hi, lo := b.Delay(failures, 0), b.Delay(failures, 0.999999)
		if hi != min(want, 15*time.Minute) || lo < hi*8/10 || lo > hi {
			t.Errorf("after %d failures: %s to %s, want %s less at most a fifth", failures, lo, hi, min(want, 15*time.Minute))
		}
		want *= 2
	}
	if err := b.Validate(); err != nil {
		t.Error(err)
	}
	tiers := worker.NewTopology("").RetryTiers
	if longest := tiers[len(tiers)-1]; longest < b.Max {
		t.Errorf("the longest retry tier is %s, below the backoff's cap %s: delays would be cut", longest, b.Max)
	}
	for _, bad := range []worker.Backoff{{Base: 0, Max: time.Second}, {Base: time.Second, Max: time.Millisecond}, {Base: time.Second, Max: time.Minute, Spread: 1.5}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
