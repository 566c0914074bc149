package phrase_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{90 * 24 * time.Hour, "90d"}, {24 * time.Hour, "1d"}, {36 * time.Hour, "36h"}, {time.Hour, "1h"},
		{90 * time.Minute, "1h30m"}, {time.Hour + 5*time.Second, "1h0m5s"}, {5 * time.Minute, "5m"},
		{30 * time.Second, "30s"}, {1500 * time.Millisecond, "1.5s"}, {200 * time.Millisecond, "200ms"}, {0, "0s"},
	} {
		if got := phrase.Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestApproximate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{45 * time.Second, "45s"}, {95 * time.Second, "1m35s"}, {14*time.Minute + 20*time.Second, "14m"},
		{2*time.Hour + 3*time.Minute, "2h03m"}, {166*time.Hour + 33*time.Minute, "6d22h"}, {400 * time.Millisecond, "0s"},
	} {
		if got := phrase.Approximate(c.d); got != c.want {
			t.Errorf("Approximate(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
