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
	if d, ok := parseSpan(value); ok {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, flagErrorf("invalid --%s %q: use an RFC 3339 time (2026-11-30T03:00:00Z), a date (2026-11-30) or a duration ago (90m, 2h, 3d)", flag, value)
}

// parseLaterFlag reads a time to come: an RFC 3339 time, or a duration
// from now (90m, 2h, 3d, with or without a leading +). A time already past
// is refused, saying now.
func parseLaterFlag(flag, value string, now time.Time) (time.Time, error) {
	value = strings.TrimSpace(value)
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		d, ok := parseSpan(strings.TrimPrefix(value, "+"))
		if !ok {
			return time.Time{}, flagErrorf("invalid --%s %q: use an RFC 3339 time (2026-11-30T03:00:00Z) or a duration from now (90m, 2h, 1d)", flag, value)
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, flagErrorf("--%s %s is not in the future (it is %s now): name a later time, or leave it out",
			flag, t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return t.UTC(), nil
}

// parseSpan reads a non-negative duration: Go's (90m, 2h) or whole days
// (3d).
func parseSpan(value string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(value, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days && n >= 0 {
			return time.Duration(n) * 24 * time.Hour, true
		}
	}
	if d, err := time.ParseDuration(value); err == nil && d >= 0 {
		return d, true
	}
	return 0, false
}
