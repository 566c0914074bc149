package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
)

// running returns the TUI over a request 1 that is approved and a fake
// runner that holds until stopped, then ends as the runner's stop path does.
func running(opts ...Option) Model {
	approved := fakes.Request(1, "alice", 4)
	approved.Status = replay.StatusApproved
	svc := tuitest.Services(fakes.Letters(5), fakes.NewRequests("bob", approved))
	svc.Runner = &tuitest.Runner{Steps: []RunProgress{{Total: 4, Done: 1, Confirmed: 1}}, Hold: make(chan struct{}),
		Stopped: RunSummary{Final: RunProgress{Total: 4, Done: 1, Confirmed: 1}}}
	return New(svc, append([]Option{WithRenderer(frame.AsciiRenderer()), WithRefresh(0)}, opts...)...)
}

// screenWait waits until what the program drew holds want.
func screenWait(t *testing.T, out io.Reader, want string) {
	t.Helper()
	teatest.WaitFor(t, out, func(b []byte) bool { return bytes.Contains(b, []byte(want)) }, teatest.WithDuration(5*time.Second))
}

// TestQuitAsksWhileARunGoes: q with a run in progress asks; k keeps the run
// and the TUI; s stops the run by its stop path and quits once it stopped,
// saying how to resume. Ctrl-C asks the same question.
func TestQuitAsksWhileARunGoes(t *testing.T) {
	t.Parallel()
	for _, quitKey := range []string{"q", "ctrl+c"} {
		t.Run(quitKey, func(t *testing.T) {
			t.Parallel()
			tm := teatest.NewTestModel(t, running(), teatest.WithInitialTermSize(80, 24))
			tm.Send(tuitest.Key("3"))
			screenWait(t, tm.Output(), "INC-4211")
			tm.Send(tuitest.Key("g"))
			screenWait(t, tm.Output(), "Run of replay request 1 — running")
			tm.Send(tuitest.Key(quitKey))
			screenWait(t, tm.Output(), "Quit while replay request 1 is running?")
			tm.Send(tuitest.Key("k"))
			screenWait(t, tm.Output(), "1/4 settled")
			tm.Send(tuitest.Key(quitKey))
			screenWait(t, tm.Output(), "s  stop it and quit")
			tm.Send(tuitest.Key("s"))
			m := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
			if m.run.Running() {
				t.Errorf("quit with the run still going")
			}
			if !strings.Contains(m.ExitNote(), "resume it with `expiryctl replay run 1`") {
				t.Errorf("exit note %q", m.ExitNote())
			}
			if m.interrupted != (quitKey == "ctrl+c") {
				t.Errorf("interrupted %v after %s", m.interrupted, quitKey)
			}
		})
	}
}

// TestKeepDoesNotQuit: k answers the question by keeping the run and the
// TUI; nothing quits.
func TestKeepDoesNotQuit(t *testing.T) {
	t.Parallel()
	m := running()
	m, _ = tuitest.Drive(t, m, update, m.Init())
	m, _ = press(t, m, tuitest.Key("3"))
	m, cmd := update(m, frame.RunRequestMsg{ID: 1})
	_ = cmd // the run's goroutine is not started: only the question is under test
	m, msgs := press(t, m, tuitest.Key("q"))
	if asked, _ := m.Quitting(); !asked || quits(msgs) {
		t.Fatalf("q with a run: asked %v, quit %v", asked, quits(msgs))
	}
	m, msgs = press(t, m, tuitest.Key("esc"))
	if asked, stopping := m.Quitting(); asked || stopping || quits(msgs) || !m.run.Running() {
		t.Errorf("esc: asked %v, stopping %v, quit %v, running %v", asked, stopping, quits(msgs), m.run.Running())
	}
	m.run.Stop()
}

// syncBuffer is a bytes.Buffer safe for the program's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Read(p)
}

// TestRunExitsAsAnInterruptOnCtrlC: through Run, as `expiryctl tui` calls
// it, ctrl+c with nothing running ends at once with ErrInterrupted (exit
// 130), q with nil (exit 0), and q then s with a run going stops the run,
// waits for it and writes how to resume it to the notes.
func TestRunExitsAsAnInterruptOnCtrlC(t *testing.T) {
	t.Parallel()
	idle := func() Model {
		svc := tuitest.Services(fakes.Letters(5), fakes.NewRequests("bob"))
		return New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
	}
	run := func(m Model, in io.Reader, out io.Writer) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return Run(ctx, m, in, out)
	}
	if err := run(idle(), strings.NewReader("\x03"), io.Discard); !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Errorf("ctrl+c: %v, want ErrInterrupted (a context.Canceled, exit 130)", err)
	}
	if err := run(idle(), strings.NewReader("q"), io.Discard); err != nil {
		t.Errorf("q: %v, want nil (exit 0)", err)
	}

	var notes bytes.Buffer
	in, keys := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(running(WithNotes(&notes)), in, out) }()
	for _, step := range []struct{ key, then string }{{"3", "INC-4211"}, {"g", "— running"}, {"\x03", "stop it and quit"}} {
		if _, err := keys.Write([]byte(step.key)); err != nil {
			t.Fatal(err)
		}
		screenWait(t, out, step.then)
	}
	if _, err := keys.Write([]byte("s")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Errorf("ctrl+c, s with a run going: %v, want ErrInterrupted", err)
	}
	_ = keys.Close()
	if !strings.Contains(notes.String(), "request is still running; resume it with `expiryctl replay run 1`") {
		t.Errorf("notes %q", notes.String())
	}
}

// TestFormsOfferCtrlCNotQ: in a form q types into the field, so the help
// line offers ctrl+c to quit, which still works there.
func TestFormsOfferCtrlCNotQ(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "bob")
	m, _ = press(t, m, tuitest.Keys("2", "enter", "r", "tab", "tab")...)
	m, msgs := press(t, m, tuitest.Type("q?")...)
	if !m.FormOpen() || quits(msgs) || !strings.Contains(m.form.Values()["why"], "q?") {
		t.Fatalf("q? in the why field: form open %v, quit %v, values %v", m.FormOpen(), quits(msgs), m.form.Values())
	}
	help := lastLine(m.View())
	if strings.Contains(help, "q quit") || strings.Contains(help, "? keys") || !strings.Contains(help, "ctrl+c quit") {
		t.Errorf("help line in a form: %q", help)
	}
	_, msgs = press(t, m, tuitest.Key("ctrl+c"))
	if !quits(msgs) {
		t.Errorf("ctrl+c in a form did not quit")
	}
	// The search input too.
	m, _ = setup(t, "bob")
	m, _ = press(t, m, tuitest.Keys("2", "/")...)
	if help := lastLine(m.View()); strings.Contains(help, "q quit") || !strings.Contains(help, "ctrl+c quit") {
		t.Errorf("help line while searching: %q", help)
	}
}

// TestSwitchingScreensClearsTheRefusal: a refusal's banner belongs to the
// screen whose action was refused; switching screens clears it.
func TestSwitchingScreensClearsTheRefusal(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, "alice")
	m, _ = press(t, m, tuitest.Keys("3", "a")...)
	m, _ = press(t, m, append(tuitest.Type("mine"), tuitest.Key("enter"))...)
	if !strings.Contains(m.Banner(), "four-eyes") {
		t.Fatalf("alice approving her own request: banner %q", m.Banner())
	}
	m, _ = press(t, m, tuitest.Key("1"))
	if m.Banner() != "" {
		t.Errorf("banner after switching to the summary: %q", m.Banner())
	}
}

// TestRequestsAuditedOncePerVisit: the requests screen lists through the
// audited service when the operator comes to it, and through the unaudited
// reads on every refresh after that.
func TestRequestsAuditedOncePerVisit(t *testing.T) {
	t.Parallel()
	reqs := fakes.NewRequests("bob", fakes.Request(1, "alice", 2))
	reads := fakes.NewRequestReads(reqs)
	// The summary's open-request count reads through Requests too (the
	// real service counts with OpenCounter instead): count from the visit.
	audited, _ := reads.Audited(context.Background())
	unaudited, _ := reads.Unaudited(context.Background())
	svc := tuitest.Services(fakes.Letters(5), reqs)
	svc.Requests, svc.RequestReads = audited, unaudited
	m := New(svc, WithRenderer(frame.AsciiRenderer()), WithRefresh(0))
	m, _ = tuitest.Drive(t, m, update, m.Init())
	before, _ := reads.Counts()
	m, _ = press(t, m, tuitest.Key("3"))
	for range 5 {
		m, _ = tuitest.Drive(t, m, update, nil, tickMsg{})
	}
	if a, u := reads.Counts(); a-before != 1 || u != 5 {
		t.Errorf("one visit and 5 refreshes: %d audited, %d unaudited reads; want 1 and 5", a, u)
	}
	m, _ = press(t, m, tuitest.Key("1"))
	before, _ = reads.Counts()
	_, _ = press(t, m, tuitest.Key("3"))
	if a, _ := reads.Counts(); a-before != 1 {
		t.Errorf("a second visit: %d audited reads, want 1", a-before)
	}
}

func lastLine(view string) string {
	lines := strings.Split(view, "\n")
	return lines[len(lines)-1]
}
