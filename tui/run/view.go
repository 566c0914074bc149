package run

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// The run screen shows only what the runner said, as of its last report:
// a number the runner has not read yet (the queue depth before the first
// check) is shown as not read, never as 0; the stop conditions are the
// numbers the run's checks judged, so a halt and the row it names agree;
// after the run, the last report stays, with the counts the database
// settled.

func ended(s backend.RunSummary) string {
	switch s.Status {
	case replay.StatusHalted:
		return "halted: " + termsafe.EscapeLine(s.HaltReason)
	case replay.StatusCancelled:
		return "was cancelled: " + termsafe.EscapeLine(s.HaltReason)
	}
	return fmt.Sprintf("%s: %d confirmed, %d failed, %d skipped", s.Status, s.Final.Confirmed, s.Final.Failed, s.Final.Skipped)
}

// bar draws an ASCII progress bar of width cells.
func bar(done, total, width int) string {
	if width < 3 {
		return ""
	}
	inner := width - 2
	fill := 0
	if total > 0 {
		fill = min(inner, done*inner/total)
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", inner-fill) + "]"
}

// state is the run's one-word state for the title.
func (m Model) state() string {
	var interrupted *replay.InterruptedError
	switch {
	case m.svc.Runner == nil:
		return "not available"
	case m.sess != nil && m.stopping:
		return "stopping"
	case m.sess != nil && !m.reported:
		return "starting"
	case m.sess != nil:
		return "running"
	case errors.As(m.err, &interrupted):
		return "stopped, resumable"
	case m.err != nil:
		return "failed"
	case m.summary != nil:
		return string(m.summary.Status)
	}
	return "starting"
}

// canaryLine says where the canary stands.
func canaryLine(p backend.RunProgress) string {
	size := phrase.Count(p.CanaryItems, "letter", "letters")
	switch p.Canary {
	case backend.CanaryPending:
		return "not sent yet (" + size + ")"
	case backend.CanarySending:
		return "going out (" + size + ")"
	case backend.CanaryWaiting:
		return "out (" + size + "), waiting out its window"
	case backend.CanaryPassed:
		return "passed (" + size + ")"
	case backend.CanaryFailed:
		return "failed (" + size + "): the run halted before it passed"
	case backend.CanaryStopped:
		return "not passed when the run stopped (" + size + "); a resume goes on with it"
	}
	return "none: the request has no canary"
}

// ratioOf renders part of whole as a percentage with its counts.
func ratioOf(ratio float64, part, whole int, of string) string {
	if whole == 0 {
		return "no " + of + " yet"
	}
	return fmt.Sprintf("%.1f%% (%d of %d)", ratio*100, part, whole)
}

// nowWidth is the width of the stop conditions' "now" column.
const nowWidth = 28

// tail keeps the last width cells of s, marking the cut: queue names share
// their prefix and differ at the end.
func tail(s string, width int) string {
	if ansi.StringWidth(s) <= width || width < 2 {
		return s
	}
	return "…" + ansi.TruncateLeft(s, ansi.StringWidth(s)-width+1, "")
}

// stopRows are the stop conditions' rows: name, now, limit, condition.
func stopRows(p backend.RunProgress, stop replay.StopConditions, limitsKnown bool) [][4]string {
	limit := func(s string) string {
		if !limitsKnown {
			return "?"
		}
		return s
	}
	depth, redead := "not read yet", "not read yet"
	if p.Checked {
		depth = fmt.Sprint(p.QueueDepth)
		if p.DepthQueue != "" {
			depth += " in " + tail(termsafe.EscapeLine(p.DepthQueue), nowWidth-len(depth)-4)
		}
		redead = ratioOf(p.RedeadRatio, p.Redead, p.ConfirmedRun, "confirms")
	}
	return [][4]string{
		{"publish failures", ratioOf(p.FailureRatio, p.FailedRun, p.Attempted, "publishes"),
			limit(fmt.Sprintf("%.1f%%", stop.FailureRatio*100)), replay.ConditionFailureRatio},
		{"target queue depth", depth, limit(fmt.Sprint(stop.QueueDepth)), replay.ConditionQueueDepth},
		{"re-dead-lettered", redead, limit(fmt.Sprintf("%.1f%%", stop.RedeadRatio*100)), replay.ConditionRedeadRatio},
	}
}

// View renders the run.
func (m Model) View() string {
	th := m.ctx.Theme
	w := m.ctx.Width
	if m.id == 0 {
		return frameFit("no run: open the Requests screen, select an approved request and press g", w, m.ctx.Height)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", th.Title.Render(fmt.Sprintf("Run of replay request %d — %s", m.id, m.state())))
	if m.svc.Runner == nil {
		b.WriteString("The replay runner is not wired into this build of the TUI.\n")
		fmt.Fprintf(&b, "Run it from a shell instead: expiryctl replay run %d\n", m.id)
		return frameFit(b.String(), w, m.ctx.Height)
	}
	p := m.progress
	total := p.Total
	if total == 0 && m.req != nil {
		total = m.req.Items
	}
	pct := 0.0
	if total > 0 {
		pct = float64(p.Done) * 100 / float64(total)
	}
	counts := fmt.Sprintf(" %d/%d settled (%.0f%%)", p.Done, total, pct)
	fmt.Fprintf(&b, "  %s%s\n", bar(p.Done, total, max(10, min(50, w-4-len(counts)))), counts)
	fmt.Fprintf(&b, "  confirmed %d · failed %d · skipped %d · in flight %d\n", p.Confirmed, p.Failed, p.Skipped, p.InFlight)
	limit := p.Limit
	if limit == 0 && m.req != nil {
		limit = m.req.Rate
	}
	if m.reported {
		fmt.Fprintf(&b, "  published %d this run · %.1f/s on average (ceiling %g/s) · elapsed %s\n",
			p.Published, p.Rate, limit, p.Elapsed.Round(time.Second))
	} else {
		fmt.Fprintf(&b, "  nothing published yet (ceiling %g/s): waiting for the runner's first report\n", limit)
	}
	switch {
	case m.reported:
		fmt.Fprintf(&b, "  canary %s\n\n", canaryLine(p))
	case m.req != nil && m.req.Canary > 0:
		p.Canary, p.CanaryItems = backend.CanaryPending, m.req.Canary
		fmt.Fprintf(&b, "  canary %s\n\n", canaryLine(p))
	case m.req != nil:
		fmt.Fprintf(&b, "  canary %s\n\n", canaryLine(backend.RunProgress{}))
	default:
		b.WriteString("  canary: reading the request…\n\n")
	}

	stop, known := p.Stop, p.Stop != (replay.StopConditions{})
	if m.req != nil {
		stop, known = m.req.Stop, true
	}
	fmt.Fprintf(&b, "  %-20s %-*s %s\n", "stop condition", nowWidth, "now (this run)", "limit")
	for _, row := range stopRows(p, stop, known) {
		line := fmt.Sprintf("  %-20s %s %s", row[0], frame.Pad(row[1], nowWidth), row[2])
		if p.Halted == row[3] {
			line = th.Warn.Render(line + "  <- halted")
		}
		b.WriteString(line + "\n")
	}
	if o := p.Outcomes; o != nil {
		fmt.Fprintf(&b, "\n  outcomes %s\n", o.Summary())
	}
	if p.Note != "" && m.sess != nil {
		fmt.Fprintf(&b, "\n  %s\n", termsafe.EscapeLine(p.Note))
	}
	var interrupted *replay.InterruptedError
	switch {
	case errors.As(m.err, &interrupted):
		fmt.Fprintf(&b, "\n%s\n", th.Warn.Render(fmt.Sprintf("stopped before finishing: items not sent are back to pending and the request is still running; `expiryctl replay run %d` resumes it (no new approval needed)", m.id)))
	case m.err != nil:
		fmt.Fprintf(&b, "\n%s\n", th.Warn.Render("run failed: "+termsafe.EscapeLine(m.err.Error())))
	case m.summary != nil && m.summary.Status == replay.StatusHalted:
		fmt.Fprintf(&b, "\n%s\n", th.Warn.Render("halted: "+termsafe.EscapeLine(m.summary.HaltReason)+" — it needs a fresh approval to run again"))
	case m.summary != nil:
		fmt.Fprintf(&b, "\n%s\n", th.Good.Render(ended(*m.summary)))
	}
	return frameFit(b.String(), w, m.ctx.Height)
}

// frameFit wraps every line to width (the end messages are long) and fits
// the result to the screen.
func frameFit(s string, width, height int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = linewrap.Words(l, max(10, width))
	}
	return frame.Fit(strings.Join(lines, "\n"), width, height)
}
