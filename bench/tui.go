package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
	"github.com/expiryctl/expiryctl/tui"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// benchTUI measures the terminal UI in process on the archive at dbURL:
// firstFrame is the time from tui.New to the first full frame (Init, the
// summary and request counts it loads, and View at 120×40); pageDown is one
// page-down in the letter list that fetches the next page from the
// database, until the frame after it is drawn. Commands run synchronously,
// as the program would run them one after another; the refresh tick is off
// so that nothing sleeps.
func benchTUI(ctx context.Context, dbURL string) (firstFrame, pageDown time.Duration, err error) {
	// Connecting is part of opening the TUI, as it is part of running a
	// command.
	start := time.Now()
	pool, err := store.Open(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	const actor = "bench-tui"
	svc := tui.Services{
		// As `expiryctl tui` builds it: timed listings unaudited, the
		// session audited once.
		Archive:  deadletter.NewArchive(pool, actor).WithoutListingAudit(),
		Requests: &replay.Service{Pool: pool, Actor: actor},
		Policy:   func(ctx context.Context) (replay.Policy, error) { return replay.LoadPolicy(ctx, pool) },
		Actor:    actor,
	}

	var m tea.Model = tui.New(svc, tui.WithRenderer(frame.AsciiRenderer()), tui.WithRefresh(0))
	m, _ = m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if m, _, err = tuiDrain(ctx, m, m.Init()); err != nil {
		return 0, 0, err
	}
	_ = m.View()
	firstFrame = time.Since(start)

	// Open the list and its first page (not timed).
	if m, _, err = tuiDrain(ctx, m, tuiSend(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("2")})); err != nil {
		return 0, 0, err
	}
	for range 1000 {
		t0 := time.Now()
		var fetched int
		if m, fetched, err = tuiDrain(ctx, m, tuiSend(tea.KeyMsg{Type: tea.KeyPgDown})); err != nil {
			return 0, 0, err
		}
		_ = m.View()
		if fetched > 0 {
			return firstFrame, time.Since(t0), nil
		}
	}
	return firstFrame, 0, fmt.Errorf("tui: 1000 pages down never fetched a page: is the archive smaller than a page?")
}

func tuiSend(msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }

// tuiDrain runs cmd and every command its messages cause, in order, and
// counts the service calls among them (commands after the first). A
// failed call shows as a banner, which is returned as the error.
func tuiDrain(ctx context.Context, m tea.Model, cmd tea.Cmd) (tea.Model, int, error) {
	queue := []tea.Cmd{cmd}
	calls := -1
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return m, calls, err
		}
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		msg := c()
		calls++
		switch msg := msg.(type) {
		case nil:
			continue
		case tea.BatchMsg:
			queue = append(append([]tea.Cmd(nil), msg...), queue...)
			calls--
			continue
		}
		var next tea.Cmd
		m, next = m.Update(msg)
		queue = append(queue, next)
	}
	if b := m.(tui.Model).Banner(); b != "" {
		return m, calls, fmt.Errorf("tui: %s", b)
	}
	return m, calls, nil
}

// benchTUIOnArchive compares the terminal UI with the work the matching
// commands do, in process on the same large archive: the first full frame
// (connection included) against `dlq summary -o json` (connection, the
// categories and signals it reads and their JSON), and one page down in
// the list against `dlq list --limit 50` on an open pool.
func benchTUIOnArchive(ctx context.Context, cfg *config, rep *report, a archives) error {
	archive := deadletter.NewArchive(a.large.Pool, "bench")
	summary := &probe{name: "dlq summary -o json", fn: func(ctx context.Context) error {
		pool, err := store.Open(ctx, a.large.URL)
		if err != nil {
			return err
		}
		defer pool.Close()
		// What `dlq summary` reads (commands/dlq_summary.go): the
		// categories with every signal, in one snapshot.
		s, err := deadletter.NewArchive(pool, "bench").Signals(ctx, deadletter.SignalsOptions{})
		if err == nil {
			_, err = json.Marshal(s)
		}
		return err
	}}
	list := &probe{name: "dlq list --limit 50", fn: func(ctx context.Context) error {
		_, err := archive.List(ctx, deadletter.Filter{}, nil, 50)
		return err
	}}
	var frames, pages []time.Duration
	tuiProbe := &probe{name: "tui", fn: func(ctx context.Context) error {
		first, page, err := benchTUI(ctx, a.large.URL)
		frames, pages = append(frames, first), append(pages, page)
		return err
	}}
	if err := measureInterleaved(ctx, 1, 5, summary, list, tuiProbe); err != nil {
		return err
	}
	n := count(cfg.LargeN)
	rep.atMost(fmt.Sprintf("6 tui %s: first full frame vs dlq summary -o json", n), summary.median(), median(frames[1:]), 2)
	rep.atMost(fmt.Sprintf("6 tui %s: one page down vs dlq list --limit 50", n), list.median(), median(pages[1:]), 2)
	peak, err := tuiPeakRSS(ctx, cfg, a.large.URL)
	if err != nil {
		return err
	}
	rep.rss(fmt.Sprintf("6 tui %s: peak RSS of bin/expiryctl tui, 60 pages down", n), peak, 80, "")
	return nil
}

// tuiPeakRSS runs the built binary's terminal UI in a detached tmux session
// on the archive at dbURL, pages through the list, and returns the highest
// resident set size the process reached.
func tuiPeakRSS(ctx context.Context, cfg *config, dbURL string) (int64, error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return 0, fmt.Errorf("tmux is needed to run the TUI in a terminal (scripts/services.sh installs it)")
	}
	session := "expiryctl-bench-" + runID
	env := strings.Join(cfg.binaryEnv(dbURL), " ")
	start := exec.CommandContext(ctx, "tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
		"exec env "+env+" "+cfg.Bin+" tui --refresh 1s")
	if out, err := start.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("tmux: %w: %s", err, out)
	}
	defer exec.Command("tmux", "kill-session", "-t", session).Run() //nolint:errcheck // best effort
	pidOut, err := exec.CommandContext(ctx, "tmux", "display", "-p", "-t", session, "#{pane_pid}").Output()
	if err != nil {
		return 0, fmt.Errorf("tmux pane pid: %w", err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(pidOut)), &pid); err != nil {
		return 0, fmt.Errorf("tmux pane pid %q: %w", pidOut, err)
	}
	keys := func(k ...string) error {
		return exec.CommandContext(ctx, "tmux", append([]string{"send-keys", "-t", session}, k...)...).Run()
	}
	time.Sleep(2 * time.Second)
	if err := keys("2"); err != nil {
		return 0, err
	}
	for range 60 {
		time.Sleep(50 * time.Millisecond)
		if err := keys("PageDown"); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Second)
	if err := keys("Enter"); err != nil { // open a letter's detail too
		return 0, err
	}
	time.Sleep(time.Second)
	peak := readVmHWM(pid)
	_ = keys("q")
	if peak == 0 {
		return 0, fmt.Errorf("could not read the TUI's memory (pid %d): did it exit early?", pid)
	}
	return peak, nil
}
