package backoff_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/backoff"
)

func TestWaitDoublesWithinItsCapAndJitters(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Initial: time.Second, Max: 8 * time.Second}
	for _, tc := range []struct {
		try      int
		rand     float64
		min, max time.Duration
	}{
		{1, 0, 500 * time.Millisecond, 500 * time.Millisecond},
		{1, 0.999, 500 * time.Millisecond, time.Second},
		{2, 0, time.Second, time.Second},
		{3, 0.5, 3 * time.Second, 3 * time.Second},
		{4, 0.999, 4 * time.Second, 8 * time.Second},
		{40, 0.999, 4 * time.Second, 8 * time.Second},
	} {
		p.Rand = func() float64 { return tc.rand }
		if got := p.Wait(tc.try); got < tc.min || got > tc.max {
			t.Errorf("try %d with rand %v waits %s, want %s to %s", tc.try, tc.rand, got, tc.min, tc.max)
		}
	}
}

func TestWaitsOfTheDefaultDiffer(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[backoff.Default.Wait(5)] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 waits of the default policy were all %v: no jitter", seen)
	}
}
