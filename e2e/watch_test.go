package e2e_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// watchUpdated is the header's time of the last update.
var watchUpdated = regexp.MustCompile(`updated (\d\d:\d\d:\d\d) UTC`)

// TestWatchInTerminal runs `dlq summary --watch=1s` in a real terminal
// (tmux): it redraws one frame in place, under a header whose time moves on,
// follows the archive as letters arrive, stops on Ctrl-C with exit status
// 0, and leaves one audit row for the whole watch.
func TestWatchInTerminal(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	db := pgtest.New(t)
	tuiSeed(t, db, 20)
	watcher := db.Login(t, "watcher", "expiryctl_operator")

	status := filepath.Join(tm.dir, "watch.status")
	env := []string{"EXPIRYCTL_DATABASE_URL=" + watcher.URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
		"EXPIRYCTL_ACTOR=watcher", "TERM=screen-256color", "NO_COLOR=1"}
	// The shell traps SIGINT only to go on and record the program's exit
	// status; a trap with a command is not inherited, so the program gets
	// Ctrl-C as it would from an interactive shell.
	cmd := "trap true INT; env " + strings.Join(quoteAll(env), " ") + " " + shellQuote(binPath) +
		" dlq summary --watch=1s; echo $? > " + shellQuote(status)
	tm.run("new-session", "-d", "-s", "e2e", "-n", "watch", "-x", "100", "-y", "30", cmd)
	tm.run("set-option", "-g", "remain-on-exit", "on")

	oneFrame := func(s string) bool {
		lines := strings.Split(s, "\n")
		return strings.Count(s, "Ctrl-C to stop") == 1 && strings.HasPrefix(lines[0], "expiryctl dlq summary · every 1s · updated ")
	}
	first := tm.waitUntil("watch", "show the summary under its header", func(s string) bool {
		return oneFrame(s) && strings.Contains(s, "transient-exhausted")
	})
	firstAt := watchUpdated.FindStringSubmatch(first)[1]
	tm.waitUntil("watch", "redraw in place with a later update time", func(s string) bool {
		m := watchUpdated.FindStringSubmatch(s)
		return oneFrame(s) && m != nil && m[1] != firstAt
	})
	// NO_COLOR: the pane holds no styles (capture-pane -e shows them).
	if styled := tm.run("capture-pane", "-p", "-e", "-t", "e2e:watch"); strings.Contains(styled, "\x1b[") {
		t.Errorf("with NO_COLOR the frame is styled:\n%q", styled)
	}

	// A letter of another category arrives: a redraw shows it.
	body := []byte(`{"reservation_id":"r-900","expected_version":1,"idempotency_key":"expire:r-900:v1"}`)
	if _, err := deadletter.Insert(context.Background(), db.Pool, []deadletter.Letter{{Fingerprint: sha256.Sum256(body),
		JobKey: "expire:r-900:v1", ReservationID: "r-900", SourceQueue: "reservation-expiry.dlq", Category: deadletter.Validation,
		ErrorClass: "validation", Headers: []byte(`{}`), Payload: body, DeadLetteredAt: epoch}}); err != nil {
		t.Fatal(err)
	}
	tm.waitUntil("watch", "show the new letter's category", func(s string) bool {
		return oneFrame(s) && strings.Contains(s, "validation")
	})
	// The scrollback holds no earlier frames: each was drawn over the last.
	if history := tm.run("capture-pane", "-p", "-S", "-", "-t", "e2e:watch"); strings.Count(history, "Ctrl-C to stop") != 1 {
		t.Errorf("the pane's history holds %d frames, want 1:\n%s", strings.Count(history, "Ctrl-C to stop"), history)
	}

	tm.keys("watch", "C-c")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, err := os.ReadFile(status)
		if err == nil && strings.TrimSpace(string(code)) != "" {
			if got := strings.TrimSpace(string(code)); got != "0" {
				t.Errorf("the watch stopped by Ctrl-C exited %s, want 0:\n%s", got, tm.screen("watch"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not stop on Ctrl-C:\n%s", tm.screen("watch"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := tm.screen("watch"); !strings.Contains(s, "validation") || strings.Contains(s, "could not update") {
		t.Errorf("the last frame should stay on the screen, without an error:\n%s", s)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.summary' AND db_role = $1`, watcher.Name); n != 1 {
		t.Errorf("the watch left %d dlq.summary audit rows, want 1", n)
	}
}

// TestWatchPiped watches `replay list` and `replay show` through a pipe: one
// line per update, a change seen as it happens, SIGTERM or SIGINT (Ctrl-C)
// ends it with exit 0, and each watch is one audit row.
func TestWatchPiped(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	body := []byte(`{"reservation_id":"r-1","expected_version":1,"idempotency_key":"expire:r-1:v1"}`)
	if _, err := deadletter.Insert(context.Background(), db.Pool, []deadletter.Letter{{Fingerprint: sha256.Sum256(body),
		JobKey: "expire:r-1:v1", ReservationID: "r-1", SourceQueue: "q.dlq", OriginalExchange: "reservations",
		OriginalRoutingKey: "reservation.expire", Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body,
		DeadLetteredAt: epoch}}); err != nil {
		t.Fatal(err)
	}
	alice := db.Login(t, "alice", "expiryctl_operator")
	c := newCLI(alice.URL, "")
	c.ok(t, "replay", "request", "--id", "1", "--why", "INC-13")

	lines := func(p *process) []string {
		return strings.Split(strings.TrimSuffix(p.stdout.String(), "\n"), "\n")
	}
	stamp := `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ `

	list := c.start(t, "replay", "list", "--watch=1s")
	waitFor(t, 20*time.Second, "two updates of replay list", func() bool { return len(lines(list)) >= 2 })
	c.ok(t, "replay", "cancel", "1", "--why", "INC-13 fixed at the source")
	waitFor(t, 20*time.Second, "an update showing the cancellation", func() bool {
		return strings.Contains(list.stdout.String(), "cancelled=1")
	})
	list.signal(syscall.SIGTERM)
	if r := list.wait(runTimeout); r.code != 0 || r.stderr != "" {
		t.Errorf("replay list --watch ended on SIGTERM: %s", r)
	}
	pending := regexp.MustCompile(stamp + `requests=1 pending=1 open=1:pending$`)
	cancelled := regexp.MustCompile(stamp + `requests=1 cancelled=1$`)
	for i, l := range lines(list) {
		if !pending.MatchString(l) && !cancelled.MatchString(l) {
			t.Errorf("line %d of replay list --watch: %q", i, l)
		}
	}

	show := c.start(t, "replay", "show", "1", "--watch=1s")
	waitFor(t, 20*time.Second, "two updates of replay show", func() bool { return len(lines(show)) >= 2 })
	show.signal(syscall.SIGINT)
	if r := show.wait(runTimeout); r.code != 0 || r.stderr != "" {
		t.Errorf("replay show --watch ended on SIGINT: %s", r)
	}
	want := regexp.MustCompile(stamp + `request=1 kind=replay status=cancelled items=1 .*changes=0`)
	for i, l := range lines(show) {
		if !want.MatchString(l) {
			t.Errorf("line %d of replay show --watch: %q", i, l)
		}
	}

	for _, action := range []string{"replay.list", "replay.show"} {
		if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1 AND db_role = $2`, action, alice.Name); n != 1 {
			t.Errorf("%s: %d audit rows for one watch, want 1", action, n)
		}
	}
}

// TestSummaryFitsANarrowTerminal runs `dlq summary` in a 70-column terminal:
// the head's lines wrap at spaces under their text, and every table row
// stays on one line, cut at the right edge, instead of wrapping into the
// next row.
func TestSummaryFitsANarrowTerminal(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	db := pgtest.New(t)
	tuiSeed(t, db, 20)
	reader := db.Login(t, "reader", "expiryctl_operator")
	env := []string{"EXPIRYCTL_DATABASE_URL=" + reader.URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
		"TERM=screen-256color", "NO_COLOR=1"}
	cmd := "env " + strings.Join(quoteAll(env), " ") + " " + shellQuote(binPath) + " dlq summary; sleep 60"
	tm.run("new-session", "-d", "-s", "e2e", "-n", "summary", "-x", "70", "-y", "60", cmd)
	screen := tm.waitUntil("summary", "show the summary", func(s string) bool {
		return strings.Contains(s, "ERROR CLASS")
	})
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "CATEGORY") {
			// The rows under the header each start with a category: none is
			// the wrapped tail of the row above.
			for _, row := range lines[i+1:] {
				if row == "" {
					break
				}
				if !regexp.MustCompile(`^[a-z-]+ `).MatchString(row) {
					t.Errorf("a category row wrapped:\n%s", screen)
				}
			}
			// What on-call reads first fits: how many wait, how many of
			// them are overdue, since when, and whether it is getting worse.
			if f := strings.Fields(l); len(f) < 6 || f[1] != "WAITING" || f[2] != "OVERDUE" || f[3] != "OLDEST" || f[5] != "TREND" {
				t.Errorf("the category table's first columns at 70 columns: %q", l)
			}
			// The rest gives way whole: the queues, then the totals, are
			// left out rather than the header cut in the middle of one.
			if utf8.RuneCountInString(l) > 70 || strings.Contains(l, "QUEUES") || strings.HasSuffix(l, "…") {
				t.Errorf("the category table's header at 70 columns should leave out its last columns whole: %q", l)
			}
		}
		// A wrapped head line continues under its text, at column 12.
		if i > 0 && strings.HasPrefix(lines[i-1], "Arrivals ") && l != "" && !strings.HasPrefix(l, "Overdue ") &&
			!strings.HasPrefix(l, strings.Repeat(" ", 11)) {
			t.Errorf("the arrivals line did not wrap under its text:\n%s", screen)
		}
	}
}
