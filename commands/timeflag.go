package commands

import (
	"fmt"
	"strings"
	"time"
)

// parseTimeFlag reads a point in time for --since/--until: an RFC 3339 time
// ("2026-11-30T03:00:00Z"), a date ("2026-11-30", midnight UTC), or a duration
// meaning that long ago ("90m", "2h", "3d").
func parseTimeFlag(flag, value string, now time.Time) (time.Time, error) {
	value = strings.TrimSpace(value)
	if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", value); err == nil {
		return t.UTC(), nil
	}
	if days, ok := strings.CutSuffix(value, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour).UTC(), nil
		}
	}
	if d, err := time.ParseDuration(value); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, flagErrorf("invalid --%s %q: use an RFC 3339 time (2026-11-30T03:00:00Z), a date (2026-11-30) or a duration ago (90m, 2h, 3d)", flag, value)
}
