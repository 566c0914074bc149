// Package run is the TUI's "run and watch" screen: it runs an approved
// request through the backend.Runner and shows its progress — done/total,
// rate, failures, the canary, the stop conditions against their limits —
// until it completes, halts or is cancelled.
package run

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// ProgressMsg carries the latest progress of the run of request ID.
type ProgressMsg struct {
	ID       int64
	Progress backend.RunProgress
}

// FinishedMsg says the run of request ID ended.
type FinishedMsg struct {
	ID      int64
	Summary backend.RunSummary
	Err     error
}

// Outcome makes FinishedMsg a frame.Outcome.
func (m FinishedMsg) Outcome() error { return m.Err }

// LoadedMsg carries the request being run, for its limits.
type LoadedMsg struct {
	ID      int64
	Request replay.Request
	Err     error
}

// Outcome makes LoadedMsg a frame.Outcome.
func (m LoadedMsg) Outcome() error { return m.Err }

// KeyMap is the run screen's keys.
type KeyMap struct {
	Cancel, Back key.Binding
}

// DefaultKeyMap is the run screen's default key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Cancel: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "cancel request")),
		Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back (the run goes on)")),
	}
}

// ShortHelp is the run screen's keys for the help line.
func (k KeyMap) ShortHelp() []key.Binding { return []key.Binding{k.Cancel, k.Back} }

// FullHelp is the run screen's keys for the full help.
func (k KeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }

// session is one run in flight: the runner's goroutine writes the latest
// progress into progress (keeping only the newest) and its end into done.
type session struct {
	id       int64
	cancel   context.CancelFunc
	ctx      context.Context
	progress chan backend.RunProgress
	done     chan FinishedMsg
}

// Model is the run screen.
type Model struct {
	ctx      frame.Context
	svc      backend.Services
	keys     KeyMap
	id       int64
	req      *replay.Request
	progress backend.RunProgress
	summary  *backend.RunSummary
	err      error
	sess     *session
}

// New returns an idle run screen over svc.
func New(ctx frame.Context, svc backend.Services) Model {
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap()}
}

// Keys returns the run screen's key map.
func (m Model) Keys() KeyMap { return m.keys }

// Capturing is false: the screen has no text input.
func (m Model) Capturing() bool { return false }

// SetFrame resizes the screen.
func (m Model) SetFrame(ctx frame.Context) Model { m.ctx = ctx; return m }

// Running reports whether a run is in flight.
func (m Model) Running() bool { return m.sess != nil }

// Refresh does nothing: progress comes from the runner.
func (m Model) Refresh() tea.Cmd { return nil }

// Start runs request id, unless a run is already going.
func (m Model) Start(id int64) (Model, tea.Cmd) {
	if m.sess != nil {
		return m, frame.Send(frame.NoticeMsg{Text: fmt.Sprintf("replay request %d is still running here: wait for it, or cancel it (c)", m.sess.id)})
	}
	m.id, m.req, m.summary, m.err, m.progress = id, nil, nil, nil, backend.RunProgress{}
	requests := m.svc.Requests
	load := func() tea.Msg {
		ctx, cancel := frame.Call()
		defer cancel()
		d, err := requests.Show(ctx, id, 1)
		return LoadedMsg{ID: id, Request: d.Request, Err: err}
	}
	if m.svc.Runner == nil {
		return m, load
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{id: id, ctx: ctx, cancel: cancel, progress: make(chan backend.RunProgress, 1), done: make(chan FinishedMsg, 1)}
	m.sess = s
	runner := m.svc.Runner
	start := func() tea.Msg {
		go func() {
			sum, err := runner.Run(s.ctx, id, func(p backend.RunProgress) {
				for {
					select {
					case s.progress <- p:
						return
					default:
					}
					select {
					case <-s.progress:
					default:
					}
				}
			})
			s.done <- FinishedMsg{ID: id, Summary: sum, Err: err}
		}()
		return nil
	}
	return m, tea.Batch(load, start, listen(s))
}

// listen waits for the next progress or the end of the run.
func listen(s *session) tea.Cmd {
	return func() tea.Msg {
		select {
		case p := <-s.progress:
			return ProgressMsg{ID: s.id, Progress: p}
		case f := <-s.done:
			return f
		}
	}
}

// Stop cancels a run in flight (when the TUI quits); the runner stops at a
// safe point and `replay run` resumes it later.
func (m Model) Stop() {
	if m.sess != nil {
		m.sess.cancel()
	}
}

// Update handles progress, the end of a run and keys.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		if msg.ID == m.id && msg.Err == nil {
			r := msg.Request
			m.req = &r
		}
	case ProgressMsg:
		if m.sess == nil || msg.ID != m.sess.id {
			return m, nil
		}
		m.progress = msg.Progress
		return m, listen(m.sess)
	case FinishedMsg:
		if m.sess == nil || msg.ID != m.sess.id {
			return m, nil
		}
		m.sess.cancel()
		m.sess = nil
		if msg.Err != nil {
			m.err = msg.Err
			return m, nil
		}
		s := msg.Summary
		m.summary = &s
		m.progress = s.Final
		return m, tea.Batch(frame.Send(frame.RefreshMsg{}),
			frame.Send(frame.NoticeMsg{Text: fmt.Sprintf("replay request %d %s", msg.ID, ended(s))}))
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, m.keys.Back):
			return m, frame.Send(frame.BackMsg{})
		case key.Matches(msg, m.keys.Cancel):
			if m.id == 0 {
				return m, nil
			}
			r := replay.Request{ID: m.id, Kind: replay.KindReplay, Status: replay.StatusRunning}
			if m.req != nil {
				r = *m.req
			}
			return m, action.CancelForm(m.svc, r)
		}
	}
	return m, nil
}

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

// View renders the run.
func (m Model) View() string {
	th := m.ctx.Theme
	w := m.ctx.Width
	if m.id == 0 {
		return frame.Fit("no run: open the Requests screen, select an approved request and press g", w, m.ctx.Height)
	}
	var b strings.Builder
	state := "starting"
	switch {
	case m.svc.Runner == nil:
		state = "not available"
	case m.sess != nil:
		state = "running"
	case m.err != nil:
		state = "failed"
	case m.summary != nil:
		state = string(m.summary.Status)
	}
	fmt.Fprintf(&b, "%s\n\n", th.Title.Render(fmt.Sprintf("Run of replay request %d — %s", m.id, state)))
	if m.svc.Runner == nil {
		b.WriteString("The replay runner is not wired into this build of the TUI.\n")
		fmt.Fprintf(&b, "Run it from a shell instead: expiryctl replay run %d\n", m.id)
		return frame.Fit(b.String(), w, m.ctx.Height)
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
	counts := fmt.Sprintf(" %d/%d %3.0f%%", p.Done, total, pct)
	fmt.Fprintf(&b, "  %s%s\n", bar(p.Done, total, max(10, min(50, w-4-len(counts)))), counts)
	fmt.Fprintf(&b, "  confirmed %d · failed %d · skipped %d\n", p.Confirmed, p.Failed, p.Skipped)
	limit := p.Limit
	if limit == 0 && m.req != nil {
		limit = m.req.Rate
	}
	fmt.Fprintf(&b, "  rate %.1f/s (limit %g/s) · elapsed %s\n", p.Rate, limit, p.Elapsed.Round(time.Second))
	canary := string(p.Canary)
	if canary == "" {
		canary = "none"
	}
	if p.CanaryItems > 0 {
		canary += " (" + phrase.Count(p.CanaryItems, "letter", "letters") + ")"
	}
	fmt.Fprintf(&b, "  canary %s\n\n", canary)

	fmt.Fprintf(&b, "  %-22s %10s %10s\n", "stop condition", "now", "limit")
	var stop replay.StopConditions
	if m.req != nil {
		stop = m.req.Stop
	}
	fmt.Fprintf(&b, "  %-22s %9.1f%% %9.1f%%\n", "publish failures", p.FailureRatio*100, stop.FailureRatio*100)
	fmt.Fprintf(&b, "  %-22s %10d %10d\n", "target queue depth", p.QueueDepth, stop.QueueDepth)
	fmt.Fprintf(&b, "  %-22s %9.1f%% %9.1f%%\n", "re-dead-lettered", p.RedeadRatio*100, stop.RedeadRatio*100)
	if o := p.Outcomes; o != nil {
		fmt.Fprintf(&b, "\n  outcomes %s\n", o.Summary())
	}
	if p.Note != "" {
		fmt.Fprintf(&b, "\n  %s\n", termsafe.EscapeLine(p.Note))
	}
	switch {
	case m.err != nil:
		fmt.Fprintf(&b, "\n%s\n", th.Warn.Render("run failed: "+termsafe.EscapeLine(m.err.Error())))
	case m.summary != nil && m.summary.Status == replay.StatusHalted:
		fmt.Fprintf(&b, "\n%s\n", th.Warn.Render("halted: "+termsafe.EscapeLine(m.summary.HaltReason)+" — it needs a fresh approval to run again"))
	case m.summary != nil:
		fmt.Fprintf(&b, "\n%s\n", th.Good.Render(ended(*m.summary)))
	}
	return frame.Fit(b.String(), w, m.ctx.Height)
}
