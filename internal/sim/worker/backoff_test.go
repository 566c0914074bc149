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
	}
	for _, tt := range tests {
		got := tt.backoff.Delay(tt.failures, tt.r)
		if got.Truncate(ms) != tt.want {
			t.Errorf("%s: Delay(%d, %v) = %v, want %v", tt.name, tt.failures, tt.r, got, tt.want)
		}
	}
}
