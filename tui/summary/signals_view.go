package summary

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// sparkLevels are the cells of a sparkline, from one letter up to the
// peak; a minute without letters is a dot, so that one letter still shows
// without colour.
var sparkLevels = []rune("▁▂▃▄▅▆▇█")

const sparkEmpty = '·'

// sparkLabel is the width of a sparkline's category column, as the table's.
const sparkLabel = 19

// minutesPerCell are the bucket widths a sparkline can draw, each dividing
// the hour.
var minutesPerCell = []int{1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60}

// signalLines renders the headline: arrival rate and trend, overdue holds.
func (m Model) signalLines() []string {
	th := m.ctx.Theme
	if !m.loaded {
		return []string{"  arrivals and overdue holds: loading…"}
	}
	s := m.signals
	a := s.Arrivals
	arrivals := fmt.Sprintf("  arrivals: %s/min last 5 min, %s vs 1h (%s/min), 24h %s/min",
		rate(a.Last5m.PerMinute), trend(a.FiveMinutesVsHour), rate(a.Last1h.PerMinute), rate(a.Last24h.PerMinute))
	if a.FiveMinutesVsHour.Direction == deadletter.Rising {
		arrivals = th.Warn.Render(arrivals)
	}
	o := s.Overdue
	overdue := "  overdue holds: none"
	if o.Count > 0 {
		overdue = fmt.Sprintf("  overdue holds: %d, max %s late, p99 %s", o.Count, lateness(o.LatenessMax), lateness(o.LatenessP99))
		overdue = th.Warn.Render(overdue)
	}
	if o.Permanent > 0 {
		overdue += th.Dim.Render(fmt.Sprintf(" · %d failed for good, not paged", o.Permanent))
	}
	lines := []string{arrivals, overdue}
	if held := m.holdsLine(); held != "" {
		lines = append(lines, held)
	}
	return lines
}

// holdsLine is the reservation database's own word on its holds past
// their deadline; "" when it is not read (no reader, or the policy sets
// no gap query), so that a small terminal keeps its room.
func (m Model) holdsLine() string {
	th := m.ctx.Theme
	switch {
	case !m.holdsLoaded || errors.Is(m.holdsErr, replay.ErrNoGapQuery):
		return ""
	case m.holdsErr != nil:
		return th.Warn.Render("  at source: unavailable (" + termsafe.EscapeLine(dsn.RedactText(m.holdsErr.Error())) + ")")
	case m.holds.PastDeadline == 0:
		return "  at source: no hold past its deadline"
	}
	line := fmt.Sprintf("  at source: %d holds past deadline, oldest %s late", m.holds.PastDeadline,
		m.holds.OldestLate().Round(time.Second))
	if n := m.holds.Unaccounted(m.signals.Overdue.StillHeld()); n > 0 {
		line += fmt.Sprintf(", %d no letter speaks for", n)
	}
	return th.Warn.Render(line)
}

// rate shows letters per minute with a precision that keeps small rates.
func rate(perMinute float64) string {
	switch {
	case perMinute >= 10 || perMinute == 0:
		return strconv.FormatFloat(perMinute, 'f', 0, 64)
	case perMinute >= 1:
		return strconv.FormatFloat(perMinute, 'f', 1, 64)
	}
	return strconv.FormatFloat(perMinute, 'f', 2, 64)
}

// trend says which way the rate moves, with its ratio when there is one.
func trend(t deadletter.Trend) string {
	if t.Ratio == nil {
		return string(t.Direction)
	}
	return fmt.Sprintf("%s ×%.1f", t.Direction, *t.Ratio)
}

// lateness shows a lateness like an age: "45s", "12m", "3h05m".
func lateness(s *deadletter.Seconds) string {
	if s == nil {
		return "-"
	}
	now := time.Unix(0, 0)
	return frame.Age(now, now.Add(-s.Duration()))
}

// sparkLines renders the last hour's arrivals per minute, a line per
// category on one scale, within width cells.
func (m Model) sparkLines(width int) []string {
	th := m.ctx.Theme
	if _, ok := m.svc.Archive.(service.ArrivalMinuter); !ok {
		return nil
	}
	if !m.minutesLoaded {
		return []string{th.Title.Render("Arrivals per minute, last hour"), "  loading…"}
	}
	// The cells that fit after "  " + label + " " and " NNNN/h".
	room := width - 2 - sparkLabel - 1 - 8
	per := minutesPerCell[len(minutesPerCell)-1]
	for _, p := range minutesPerCell {
		if deadletter.ArrivalMinuteBuckets/p <= room {
			per = p
			break
		}
	}
	title := "Arrivals per minute, last hour"
	if per > 1 {
		title = fmt.Sprintf("Arrivals, last hour (a cell is %d min)", per)
	}
	cells := make([][]int64, len(m.minutes.Categories))
	var peak int64
	for i, c := range m.minutes.Categories {
		cells[i] = make([]int64, deadletter.ArrivalMinuteBuckets/per)
		for j, n := range c.Letters {
			cells[i][j/per] += n
		}
		for _, n := range cells[i] {
			peak = max(peak, n)
		}
	}
	if len(cells) == 0 {
		return []string{th.Title.Render(title), "  no letters arrived in the last hour"}
	}
	lines := []string{th.Title.Render(title) + th.Dim.Render(fmt.Sprintf("  peak %d per cell, now at the right", peak))}
	for i, c := range m.minutes.Categories {
		var b strings.Builder
		var total int64
		for _, n := range cells[i] {
			total += n
			if n == 0 {
				b.WriteRune(sparkEmpty)
				continue
			}
			level := int((n*int64(len(sparkLevels)) + peak - 1) / peak)
			b.WriteRune(sparkLevels[min(len(sparkLevels), max(1, level))-1])
		}
		label := ansi.Truncate(string(c.Category), sparkLabel, "…")
		lines = append(lines, fmt.Sprintf("  %-*s %s %d/h", sparkLabel, label, th.Good.Render(b.String()), total))
	}
	return lines
}

// queueLines renders the live queues' states: scheduled in retry queues,
// ready and in flight in the work queue, isolated in the DLQ.
func (m Model) queueLines() []string {
	th := m.ctx.Theme
	work := termsafe.EscapeLine(m.svc.WorkQueue)
	switch {
	case m.svc.LiveQueues == nil:
		return []string{th.Dim.Render("  live queues: not read (no live view given to the terminal UI)")}
	case !m.queuesLoaded:
		return []string{"  live queues " + work + ": loading…"}
	case m.queuesErr != nil:
		return []string{th.Warn.Render("  live queues of " + work + ": unavailable"), "    " + termsafe.EscapeLine(m.queuesErr.Error())}
	case m.queues.Unavailable != "":
		return []string{th.Warn.Render("  live queues of " + work + ": unavailable"), "    " + termsafe.EscapeLine(m.queues.Unavailable)}
	}
	s := m.queues.States()
	age := func(d *time.Duration, estimated bool) string {
		if d == nil {
			return ""
		}
		now := time.Unix(0, 0)
		if estimated {
			return ", oldest ~" + frame.Age(now, now.Add(-*d)) + " (estimated: ready / ack rate)"
		}
		return ", oldest " + frame.Age(now, now.Add(-*d))
	}
	plural := func(n int64, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	}
	consumers := fmt.Sprintf("%d %s", s.Consumers, plural(int64(s.Consumers), "consumer", "consumers"))
	if s.ConsumersUnseen {
		consumers = "consumers unseen"
	}
	first := fmt.Sprintf("  %s: ready %d%s · in flight %d (%s)", work, s.Ready, age(s.ReadyHeadAge, s.ReadyHeadAgeEstimated), s.InFlight,
		consumers)
	if s.Consumers == 0 && !s.ConsumersUnseen && s.Ready > 0 {
		first = th.Warn.Render(first)
	}
	second := fmt.Sprintf("  scheduled %d in %d retry %s · isolated %d in the DLQ%s", s.Scheduled, s.RetryQueues,
		plural(int64(s.RetryQueues), "queue", "queues"), s.Isolated, age(s.IsolatedHeadAge, s.IsolatedHeadAgeEstimated))
	return []string{first, second}
}
