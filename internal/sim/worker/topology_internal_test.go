package worker

import (
	"testing"
	"time"
)

func TestTierFor(t *testing.T) {
	t.Parallel()
	topo := NewTopology("x")
	topo.RetryTiers = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
	tests := []struct {
		delay, wantTier, wantDelay time.Duration
	}{
		{300 * time.Millisecond, time.Second, 300 * time.Millisecond},
		{time.Second, time.Second, time.Second},
		{1100 * time.Millisecond, 5 * time.Second, 1100 * time.Millisecond},
		{time.Minute, 30 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		tier, delay := topo.tierFor(tt.delay)
		if tier != tt.wantTier || delay != tt.wantDelay {
			t.Errorf("tierFor(%v) = %v, %v; want %v, %v", tt.delay, tier, delay, tt.wantTier, tt.wantDelay)
		}
	}
	if got := topo.RetryQueue(5 * time.Second); got != "x.reservation-expiry.retry.5000" {
		t.Errorf("RetryQueue = %q", got)
	}
}
