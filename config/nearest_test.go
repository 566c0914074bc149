package config

import (
	"slices"
	"testing"
)

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
		sorted, near := Nearest(tt.queue, slices.Clone(tt.known))
		if !slices.Equal(sorted, tt.wantSorted) && !(len(sorted) == 0 && len(tt.wantSorted) == 0) {
			t.Errorf("Nearest(%q, %v) sorted %v, want %v", tt.queue, tt.known, sorted, tt.wantSorted)
		}
		if near != tt.wantNear {
			t.Errorf("Nearest(%q, %v) suggests %q, want %q", tt.queue, tt.known, near, tt.wantNear)
		}
	}
}
