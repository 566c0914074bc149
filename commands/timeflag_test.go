package commands

import (
	"testing"
	"time"
)

// TestParseTimeFlag: a duration ago is counted from now in whole seconds,
// since a request stores its selection as written and `replay show` prints
// it: "2h" is no claim to the nanosecond. A time given in full is kept.
func TestParseTimeFlag(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	for _, tt := range []struct{ value, want string }{
		{"2h", "2026-11-30T10:00:00Z"},
		{"90m", "2026-11-30T10:30:00Z"},
		{"2026-11-30", "2026-11-30T00:00:00Z"},
		{"2026-11-30T03:00:00.5Z", "2026-11-30T03:00:00.5Z"},
	} {
		got, err := parseTimeFlag("since", tt.value, now)
		if err != nil {
			t.Fatalf("%q: %v", tt.value, err)
		}
		if s := got.Format(time.RFC3339Nano); s != tt.want {
			t.Errorf("--since %s = %s, want %s", tt.value, s, tt.want)
		}
	}
}
