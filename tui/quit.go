package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/run"
)

// ErrInterrupted is what Run returns when the operator pressed Ctrl-C: an
// interrupt, as a shell means it, so the command exits 130 (it wraps
// context.Canceled), after the same question as q when a run was going.
var ErrInterrupted = fmt.Errorf("interrupted with ctrl+c: %w", context.Canceled)

// quitState is where quitting stands: asked (the question is shown), or
// stopping (the run was asked to stop; the TUI quits once it did).
type quitState int

const (
	quitNone quitState = iota
	quitAsked
	quitStopping
)

// QuitKeyMap is the keys of the question asked before quitting with a run
// in progress.
type QuitKeyMap struct {
	Keep, Stop key.Binding
}

// DefaultQuitKeyMap is the question's default keys: esc keeps the run, as
// the safe answer; a second ctrl+c stops it, as a second interrupt does.
func DefaultQuitKeyMap() QuitKeyMap {
	return QuitKeyMap{
		Keep: key.NewBinding(key.WithKeys("k", "esc", "n"), key.WithHelp("k/esc", "keep it running, don't quit")),
		Stop: key.NewBinding(key.WithKeys("s", "ctrl+c"), key.WithHelp("s", "stop it and quit")),
	}
}

// ShortHelp is the question's keys for the help line.
func (k QuitKeyMap) ShortHelp() []key.Binding { return []key.Binding{k.Keep, k.Stop} }

// FullHelp is the question's keys for the full help.
func (k QuitKeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }

// Quitting reports whether the question is shown (asked) or the TUI waits
// for a run to stop before it quits (stopping).
func (m Model) Quitting() (asked, stopping bool) {
	return m.quitting == quitAsked, m.quitting == quitStopping
}

// ExitNote is what the TUI says on stderr once it has left the screen: how
// to resume a run it stopped; empty when there is nothing to say.
func (m Model) ExitNote() string { return m.exitNote }

// askQuit quits at once when no run is in progress, and otherwise asks.
// interrupt is set for ctrl+c, which exits 130.
func (m Model) askQuit(interrupt bool) (Model, tea.Cmd) {
	m.interrupted = m.interrupted || interrupt
	if !m.run.Running() {
		return m.quit()
	}
	m.quitting, m.showHelp = quitAsked, false
	return m, nil
}

// handleQuitKey answers the question.
func (m Model) handleQuitKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case m.quitting == quitStopping:
		// Waiting for the runner: a further ctrl+c leaves now; Run still
		// waits a bounded time for the runner's stop path.
		if k.Type == tea.KeyCtrlC {
			return m.quit()
		}
		return m, nil
	case key.Matches(k, m.quitKeys.Keep):
		m.quitting, m.interrupted = quitNone, false
		return m, nil
	case key.Matches(k, m.quitKeys.Stop):
		m.quitting = quitStopping
		m.run = m.run.StopRun()
		return m, nil
	}
	return m, nil
}

// runFinished quits once a run the operator chose to stop has stopped,
// noting how to resume it.
func (m Model) runFinished(msg run.FinishedMsg) (Model, tea.Cmd) {
	m.exitNote = stopNote(msg.ID, msg.Err)
	if m.quitting != quitStopping {
		return m, nil
	}
	return m.quit()
}

// stopNote says how to go on with request id after its run ended with err
// (nil: it ended by itself, nothing to say).
func stopNote(id int64, err error) string {
	var interrupted *replay.InterruptedError
	if errors.As(err, &interrupted) {
		return fmt.Sprintf("replay request %d stopped before finishing: letters not sent are back to pending and the request is still running; resume it with `expiryctl replay run %d` (no new approval needed)", id, id)
	}
	return ""
}

// quitView is the question, or the wait for the run to stop.
func (m Model) quitView() string {
	th := m.theme
	id := m.run.RunningID()
	var lines []string
	if m.quitting == quitStopping {
		lines = []string{th.Title.Render(fmt.Sprintf("Stopping the run of replay request %d", id)), "",
			"The runner stops at its next safe point: what is in flight gets the broker's",
			"answer, letters not sent go back to pending. The TUI quits once it stopped.",
			"", th.Dim.Render("ctrl+c again: quit without waiting here (the stop still completes)")}
	} else {
		lines = []string{th.Title.Render(fmt.Sprintf("Quit while replay request %d is running?", id)), "",
			"The run goes on only while this TUI does. Choose:", "",
			"  k  keep it running and stay here (esc does the same)",
			"  s  stop it and quit: letters not sent go back to pending and the",
			fmt.Sprintf("     request stays resumable with `expiryctl replay run %d`", id)}
	}
	w := max(20, min(m.width, 80))
	box := th.Box.Width(w - 2).Render(strings.Join(lines, "\n"))
	return th.Renderer.Place(m.width, m.bodyHeight, 0.5, 0.3, box)
}

// runStillGoing is what the TUI notes when it leaves with a run in flight
// that it could not wait for.
func runStillGoing(id int64) string {
	return fmt.Sprintf("replay request %d was stopped as the TUI ended: if it did not finish stopping, `expiryctl replay run %d` resumes it (no new approval needed)", id, id)
}
