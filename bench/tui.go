package main

import (
	"context"
	"fmt"
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
	pool, err := store.Open(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	const actor = "bench-tui"
	svc := tui.Services{
		Archive:  deadletter.NewArchive(pool, actor),
		Requests: &replay.Service{Pool: pool, Actor: actor},
		Policy:   func(ctx context.Context) (replay.Policy, error) { return replay.LoadPolicy(ctx, pool) },
		Actor:    actor,
	}

	start := time.Now()
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
