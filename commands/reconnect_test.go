package commands

import (
	"testing"
	"time"
)

func TestReconnectWaitsGrowWithinTheirBoundsAndJitter(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 20 {
		waits := reconnectWaits()
		first, stop := waits.Next()
		if stop || first < 250*time.Millisecond || first > 750*time.Millisecond {
			t.Fatalf("first wait %s (stop %v), want 250ms to 750ms", first, stop)
		}
		seen[first] = true
		var last time.Duration
		for range 200 {
			last, stop = waits.Next()
			if stop || last > 30*time.Second {
				t.Fatalf("a later wait is %s (stop %v), want at most 30s and no end", last, stop)
			}
		}
		if last < 10*time.Second {
			t.Errorf("after 200 tries the wait is %s, want it near the cap (10s to 30s)", last)
		}
	}
	if len(seen) < 2 {
		t.Errorf("20 first waits were all %v: no jitter", seen)
	}
}
