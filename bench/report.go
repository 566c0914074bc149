package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// verdict is how one line of the report ended.
type verdict int

const (
	info verdict = iota // measured, no target
	pass
	fail
	broken // the scenario could not be measured
)

func (v verdict) String() string {
	switch v {
	case pass:
		return "PASS"
	case fail:
		return "FAIL"
	case broken:
		return "ERROR"
	}
	return "info"
}

// line is one row of the report: a subject measured against a baseline from
// the same run, or an absolute resource figure (peak RSS).
type line struct {
	scenario string
	baseline string
	subject  string
	ratio    string
	target   string
	verdict  verdict
}

// report collects lines as scenarios finish.
type report struct {
	lines []line
	notes []string
}

// atLeast records a higher-is-better ratio (throughput) with a floor.
func (r *report) atLeast(scenario string, baseline, subject float64, unit string, floor float64) {
	ratio := subject / baseline
	v := pass
	if !(ratio >= floor) {
		v = fail
	}
	r.lines = append(r.lines, line{scenario, fmt.Sprintf("%.0f %s", baseline, unit), fmt.Sprintf("%.0f %s", subject, unit),
		fmt.Sprintf("%.2f×", ratio), fmt.Sprintf("≥ %.2f×", floor), v})
}

// atMost records a lower-is-better ratio (latency) with a ceiling; ceiling
// 0 means report only.
func (r *report) atMost(scenario string, baseline, subject time.Duration, ceiling float64) {
	ratio := float64(subject) / float64(baseline)
	v, target := info, "report only"
	if ceiling > 0 {
		target = fmt.Sprintf("≤ %.2f×", ceiling)
		v = pass
		if !(ratio <= ceiling) {
			v = fail
		}
	}
	r.lines = append(r.lines, line{scenario, fmtDuration(baseline), fmtDuration(subject), fmt.Sprintf("%.2f×", ratio), target, v})
}

// cpuPerItem records CPU per item, lower is better, against its floor: what
// the bare baseline of the same run took for the same work. Unlike a rate,
// it does not depend on how many cores the machine has, so a ceiling on it
// shows a regression on any machine; ceiling 0 means report only. A floor
// of 0 (a cost the baseline does not have, or a baseline too short for
// the clock's 10 ms ticks) has no ratio.
func (r *report) cpuPerItem(scenario string, floorSeconds, subjectSeconds float64, items int, ceiling float64) {
	perItem := func(s float64) string { return fmt.Sprintf("%.1f µs", 1e6*s/float64(items)) }
	ratio, v, target, floor := "-", info, "report only", "-"
	if floorSeconds > 0 {
		floor = perItem(floorSeconds)
		ratio = fmt.Sprintf("%.2f×", subjectSeconds/floorSeconds)
		if ceiling > 0 {
			target = fmt.Sprintf("≤ %.2f×", ceiling)
			v = pass
			if !(subjectSeconds/floorSeconds <= ceiling) {
				v = fail
			}
		}
	}
	r.lines = append(r.lines, line{scenario, floor, perItem(subjectSeconds), ratio, target, v})
}

// throughputInfo records a throughput ratio without a target.
func (r *report) throughputInfo(scenario string, baseline, subject float64, unit string) {
	r.lines = append(r.lines, line{scenario, fmt.Sprintf("%.0f %s", baseline, unit), fmt.Sprintf("%.0f %s", subject, unit),
		fmt.Sprintf("%.2f×", subject/baseline), "report only", info})
}

// rss records a peak resident set size against an absolute ceiling: memory,
// unlike time, does not depend on how busy the machine is.
func (r *report) rss(scenario string, peakBytes int64, ceilingMB float64, extra string) {
	mb := float64(peakBytes) / (1 << 20)
	v := pass
	if !(mb < ceilingMB) {
		v = fail
	}
	r.lines = append(r.lines, line{scenario, "-", fmt.Sprintf("%.1f MB%s", mb, extra), "-", fmt.Sprintf("< %.0f MB", ceilingMB), v})
}

// failed records a scenario that could not be measured.
func (r *report) failed(scenario string, err error) {
	r.lines = append(r.lines, line{scenario, "-", "-", "-", "-", broken})
	r.notes = append(r.notes, fmt.Sprintf("%s: %v", scenario, err))
}

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *report) count(v verdict) int {
	n := 0
	for _, l := range r.lines {
		if l.verdict == v {
			n++
		}
	}
	return n
}

func (r *report) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tBASELINE\tSUBJECT\tRATIO\tTARGET\tRESULT")
	for _, l := range r.lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.scenario, l.baseline, l.subject, l.ratio, l.target, l.verdict)
	}
	_ = tw.Flush()
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.notes {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(n, "\n", "\n    "))
		}
	}
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
