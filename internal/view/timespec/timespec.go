// Package timespec reads the times a person types, the same way in a
// command's flag and in the terminal UI's form: an RFC 3339 time, or a
// duration such as 90m, 2h or 3d.
package timespec

import (
	"fmt"
	"strings"
	"time"
)

// Span reads a non-negative duration: Go's (90m, 2h) or whole days (3d).
func Span(value string) (time.Duration, bool) {
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

// Later reads a time to come: an RFC 3339 time, or a duration from now
// (90m, 2h, 3d, with or without a leading +). A time already past is
// refused, saying now. name is how the person typed it (--not-before, or
// a form field's label), for the error.
func Later(name, value string, now time.Time) (time.Time, error) {
	value = strings.TrimSpace(value)
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		d, ok := Span(strings.TrimPrefix(value, "+"))
		if !ok {
			return time.Time{}, fmt.Errorf("invalid %s %q: use an RFC 3339 time (2026-11-30T03:00:00Z) or a duration from now (90m, 2h, 1d)", name, value)
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("%s %s is not in the future (it is %s now): name a later time, or leave it out",
			name, t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return t.UTC(), nil
}
