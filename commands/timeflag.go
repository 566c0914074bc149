package commands

import (
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/internal/view/timespec"
)

// parseTimeFlag reads a point in time for --since/--until: an RFC 3339 time
// ("2026-11-30T03:00:00Z"), a date ("2026-11-30", midnight UTC), or a duration
// meaning that long ago ("90m", "2h", "3d"), in whole seconds.
func parseTimeFlag(flag, value string, now time.Time) (time.Time, error) {
	value = strings.TrimSpace(value)
	if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", value); err == nil {
		return t.UTC(), nil
	}
	if d, ok := timespec.Span(value); ok {
		// Whole seconds: a replay request stores the selection and
		// `replay show` prints it, where "2h" read back as
		// 10:00:00.123456789 is noise that looks like meaning.
		return now.Add(-d).UTC().Truncate(time.Second), nil
	}
	return time.Time{}, flagErrorf("invalid --%s %q: use an RFC 3339 time (2026-11-30T03:00:00Z), a date (2026-11-30) or a duration ago (90m, 2h, 3d)", flag, value)
}

// parseLaterFlag reads a time to come for --flag (timespec.Later).
func parseLaterFlag(flag, value string, now time.Time) (time.Time, error) {
	t, err := timespec.Later("--"+flag, value, now)
	if err != nil {
		return time.Time{}, flagErrorf("%v", err)
	}
	return t, nil
}
