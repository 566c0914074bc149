package phrase

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

const day = 24 * time.Hour

// Duration is d exactly, as a person writes a setting: whole days in days
// ("90d"), anything else in Go's units without the zero ones ("1h", "1h30m",
// "30s", "1.5s", "200ms"), never "2160h0m0s". `policy set` and the
// duration flags read each form back as the same d.
func Duration(d time.Duration) string {
	if d != 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Approximate is d to the two units that matter at its size, for an age
// or a lateness: "45s", "1m35s", "14m", "2h03m", "3d04h". It rounds to
// the second.
func Approximate(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 2*day:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d/day), int(d.Hours())%24)
}
