package riverjobs

import (
	"slices"
	"testing"
)

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"expiry", "expiry", 0},
		{"expirey", "expiry", 1},
		{"expiry", "Expiry", 1},
		{"reservation-expiry", "reservation_expiry", 1},
		{"kitten", "sitting", 3},
		{"", "mail", 4},
		{"mail", "", 4},
		// By runes, not bytes: é is one substitution, not two.
		{"réserve", "reserve", 1},
		{"漢字", "漢", 1},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := editDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (it is symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestNearestSortsByDistanceAndSuggestsOnlyWhatIsNear(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		queue      string
		known      []string
		wantSorted []string
		wantNear   string
	}{
		{"expirey", []string{"mail", "expiry", "expiry", "exports"}, []string{"expiry", "exports", "mail"}, "expiry"},
		// Ties go by name: expire is as near as expiry.
		{"expirey", []string{"expiry", "expire"}, []string{"expire", "expiry"}, "expire"},
		// Nothing alike: no suggestion, still listed.
		{"zzzzzz", []string{"mail", "expiry"}, []string{"expiry", "mail"}, ""},
		// Half of the longer name may differ, no more.
		{"exp", []string{"expiry"}, []string{"expiry"}, "expiry"},
		{"ex", []string{"expiry"}, []string{"expiry"}, ""},
		{"expiry", nil, []string{}, ""},
	} {
		sorted, near := nearest(tt.queue, slices.Clone(tt.known))
		if !slices.Equal(sorted, tt.wantSorted) && !(len(sorted) == 0 && len(tt.wantSorted) == 0) {
			t.Errorf("nearest(%q, %v) sorted %v, want %v", tt.queue, tt.known, sorted, tt.wantSorted)
		}
		if near != tt.wantNear {
			t.Errorf("nearest(%q, %v) suggests %q, want %q", tt.queue, tt.known, near, tt.wantNear)
		}
	}
}
