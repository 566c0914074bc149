// Package run is the TUI's "run and watch" screen: it runs an approved
// request through the backend.Runner and shows its progress — done/total,
// rate, failures, the canary, the stop conditions against their limits —
// until it completes, halts or is cancelled.
package run

import (
	"context"
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

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
	// finished is closed once the runner returned, err being what it
	// returned: StopAndWait waits on it after the program stopped reading
	// done.
	finished chan struct{}
	err      error
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
	// reported is set once the runner reported; stopping once the
	// operator asked the run in flight to stop.
	reported, stopping bool
}

// New returns an idle run screen over svc.
func New(ctx frame.Context, svc backend.Services) Model {
	return Model{ctx: ctx, svc: svc, keys: DefaultKeyMap()}
}

// Keys returns the run screen's key map as the run stands: no cancel
// without a request, or once it completed or was cancelled (the database
// refuses both); a halted request still holds its letters until it is
// approved again or cancelled, so there cancel says what it is for.
func (m Model) Keys() KeyMap {
	k := m.keys
	status := replay.StatusRunning
	if m.summary != nil {
		status = m.summary.Status
	}
	switch {
	case m.id == 0, status == replay.StatusCompleted, status == replay.StatusCancelled:
		k.Cancel.SetEnabled(false)
	case status == replay.StatusHalted:
		k.Cancel.SetHelp("c", "cancel request (frees its letters)")
	}
	return k
}

// Capturing is false: the screen has no text input.
func (m Model) Capturing() bool { return false }

// SetFrame resizes the screen.
func (m Model) SetFrame(ctx frame.Context) Model { m.ctx = ctx; return m }

// Running reports whether a run is in flight.
func (m Model) Running() bool { return m.sess != nil }

// RunningID is the request whose run is in flight, 0 when none.
func (m Model) RunningID() int64 {
	if m.sess == nil {
		return 0
	}
	return m.sess.id
}

// Err is how the last run failed or stopped early, nil when it did not.
func (m Model) Err() error { return m.err }

// StopRun asks the run in flight to stop at its next safe point, by the
// runner's own stop path: items marked but not sent go back to pending and
// the request stays running, for `replay run` to resume. Its FinishedMsg
// follows.
func (m Model) StopRun() Model {
	if m.sess != nil {
		m.sess.cancel()
		m.stopping = true
	}
	return m
}

// Refresh does nothing: progress comes from the runner.
func (m Model) Refresh() tea.Cmd { return nil }

// Start runs request id, unless a run is already going.
func (m Model) Start(id int64) (Model, tea.Cmd) {
	if m.sess != nil {
		return m, frame.Send(frame.NoticeMsg{Text: fmt.Sprintf("replay request %d is still running here: wait for it, or cancel it (c)", m.sess.id)})
	}
	m.id, m.req, m.summary, m.err, m.progress = id, nil, nil, nil, backend.RunProgress{}
	m.reported, m.stopping = false, false
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
	s := &session{id: id, ctx: ctx, cancel: cancel, progress: make(chan backend.RunProgress, 1),
		done: make(chan FinishedMsg, 1), finished: make(chan struct{})}
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
			s.err = err
			s.done <- FinishedMsg{ID: id, Summary: sum, Err: err}
			close(s.finished)
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

// StopAndWait stops a run in flight, as Stop does, and waits up to timeout
// for the runner to return, for a TUI that is ending: stopped is false when
// it did not return in time (or no run was in flight), err what it
// returned.
func (m Model) StopAndWait(timeout time.Duration) (stopped bool, err error) {
	if m.sess == nil {
		return false, nil
	}
	m.sess.cancel()
	select {
	case <-m.sess.finished:
		return true, m.sess.err
	case <-time.After(timeout):
		return false, nil
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
		m.progress, m.reported = msg.Progress, true
		return m, listen(m.sess)
	case FinishedMsg:
		if m.sess == nil || msg.ID != m.sess.id {
			return m, nil
		}
		m.sess.cancel()
		m.sess, m.stopping = nil, false
		if msg.Summary.Final.Total > 0 {
			m.progress, m.reported = msg.Summary.Final, true
		}
		if msg.Err != nil {
			m.err = msg.Err
			return m, nil
		}
		s := msg.Summary
		m.summary = &s
		return m, tea.Batch(frame.Send(frame.RefreshMsg{}),
			frame.Send(frame.NoticeMsg{Text: fmt.Sprintf("replay request %d %s", msg.ID, ended(s))}))
	case tea.KeyMsg:
		keys := m.Keys()
		switch {
		case key.Matches(msg, keys.Back):
			return m, frame.Send(frame.BackMsg{})
		case key.Matches(msg, keys.Cancel):
			r := replay.Request{ID: m.id, Kind: replay.KindReplay, Status: replay.StatusRunning}
			if m.req != nil {
				r = *m.req
			}
			return m, action.CancelForm(m.svc, r)
		}
	}
	return m, nil
}
