package e2e_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// tuiTmux is one private tmux server (its own socket), killed when the test
// ends, so that the test neither sees nor disturbs a developer's sessions.
type tuiTmux struct {
	t      *testing.T
	socket string
	dir    string // where each pane's shell writes its program's exit status
}

// tuiNeedTmux returns a tmux server for t. Without tmux the test fails in
// CI (where scripts/services.sh installs it) and is skipped elsewhere.
func tuiNeedTmux(t *testing.T) *tuiTmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is required for the terminal UI test: install tmux (apt-get install -y tmux; scripts/services.sh does)")
		}
		t.Skip("tmux not found: install tmux to run the terminal UI test")
	}
	tm := &tuiTmux{t: t, socket: fmt.Sprintf("expiryctl-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()), dir: t.TempDir()}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tuiTmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start runs the binary's `tui` in a new window named name of a 100×30
// terminal, with env, and keeps the pane after the program exits so that its
// exit status can be read.
func (tm *tuiTmux) start(name string, env []string) {
	tm.t.Helper()
	// The shell records the exit status in a file: tmux reports a dead
	// pane's status only once it has reaped the process, which can lag.
	status := filepath.Join(tm.dir, name+".status")
	cmd := "env " + strings.Join(quoteAll(env), " ") + " " + shellQuote(binPath) + " tui; echo $? > " + shellQuote(status)
	if name == "alice" {
		tm.run("new-session", "-d", "-s", "e2e", "-n", name, "-x", "100", "-y", "30", cmd)
		tm.run("set-option", "-g", "remain-on-exit", "on")
		return
	}
	tm.run("new-window", "-d", "-t", "e2e", "-n", name, cmd)
}

// keys sends tmux key names (Enter, Escape, Space, …) or, with literal, text.
func (tm *tuiTmux) keys(pane string, keys ...string) {
	tm.t.Helper()
	tm.run(append([]string{"send-keys", "-t", "e2e:" + pane}, keys...)...)
}

func (tm *tuiTmux) text(pane, s string) {
	tm.t.Helper()
	tm.run("send-keys", "-t", "e2e:"+pane, "-l", s)
}

// screen is what the pane shows now, as plain text.
func (tm *tuiTmux) screen(pane string) string {
	tm.t.Helper()
	return tm.run("capture-pane", "-p", "-t", "e2e:"+pane)
}

// waitFor polls the pane until it shows want, failing with the screen.
func (tm *tuiTmux) waitFor(pane, want string) string {
	tm.t.Helper()
	return tm.waitUntil(pane, fmt.Sprintf("show %q", want), func(s string) bool { return strings.Contains(s, want) })
}

// waitUntil polls the pane until its screen satisfies ok, failing with the
// screen and what was awaited.
func (tm *tuiTmux) waitUntil(pane, what string, ok func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := tm.screen(pane)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("pane %s did not %s; it shows:\n%s", pane, what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tm *tuiTmux) display(pane, format string) string {
	tm.t.Helper()
	return strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e:"+pane, format))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shellQuote(s)
	}
	return out
}

// tuiHostilePayload sets the window title, clears the screen and moves the
// cursor when printed raw.
const tuiHostilePayload = setTitle + clearScreen + moveCursor + "expiry worker crashed on r-666" + setTitle

// tuiSeed stores n ordinary letters and, newest of all, one hostile letter,
// through deadletter.Insert, and returns the hostile letter's id.
func tuiSeed(t *testing.T, db *pgtest.Database, n int) int64 {
	t.Helper()
	letter := func(i int, body []byte, lastError string) deadletter.Letter {
		return deadletter.Letter{
			Fingerprint: sha256.Sum256(fmt.Appendf(nil, "tui-e2e-%d", i)), JobKey: fmt.Sprintf("expire:r-%d:v3", i),
			MessageID: fmt.Sprintf("expire:r-%d:v3", i), ReservationID: fmt.Sprintf("r-%d", i),
			IdempotencyKey: fmt.Sprintf("expire:r-%d:v3", i), SourceQueue: "reservation-expiry.dlq",
			OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire",
			Category: deadletter.TransientExhausted, ErrorClass: "db_timeout", LastError: lastError, Attempts: 3,
			Headers:     deadletter.EncodeHeaders(map[string]any{"x-error-class": "db_timeout", "x-last-error": lastError}),
			ContentType: "application/json", Payload: body, PayloadHash: sha256.Sum256(body),
			DeadLetteredAt: epoch.Add(time.Duration(i) * time.Minute),
		}
	}
	letters := make([]deadletter.Letter, 0, n+1)
	for i := 1; i <= n; i++ {
		letters = append(letters, letter(i, newJob(i).body(), "timeout: context deadline exceeded"))
	}
	letters = append(letters, letter(n+1, []byte(tuiHostilePayload), tuiHostilePayload))
	ctx := withTimeout(t)
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := deadletter.Insert(ctx, tx, letters)
		return err
	}); err != nil {
		t.Fatalf("seed letters: %v", err)
	}
	var id int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM expiryctl.dead_letters WHERE reservation_id = $1`, fmt.Sprintf("r-%d", n+1)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestTUI drives `expiryctl tui` in a real terminal (tmux) the way two
// operators would: alice goes from the summary to the letter list, opens a
// letter whose payload is hostile, and requests its replay through the form;
// her own approval is refused by four-eyes; bob, in a second terminal,
// approves it. The hostile payload must leave the screen intact.
func TestTUI(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	if res := newCLI("postgres://nobody@127.0.0.1:1/none?sslmode=disable", "x").run(t, "tui", "--help"); res.code != 0 {
		t.Fatalf("this binary has no `tui` command: register commands.NewCmdTUI in commands/root.go: %s", res)
	}
	db := pgtest.New(t)
	hostile := tuiSeed(t, db, 120)
	// Two people, two logins: four-eyes compares logins, not labels.
	logins := map[string]*pgtest.Login{
		"alice": db.Login(t, "alice", "expiryctl_operator", "expiryctl_approver"),
		"bob":   db.Login(t, "bob", "expiryctl_operator", "expiryctl_approver"),
	}
	newCLI(db.URL, "admin").ok(t, "policy", "set", "approvers="+logins["alice"].Name+","+logins["bob"].Name)

	env := func(actor string, extra ...string) []string {
		return append([]string{"EXPIRYCTL_DATABASE_URL=" + logins[actor].URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
			"EXPIRYCTL_ACTOR=" + actor, "TERM=screen-256color"}, extra...)
	}
	tm.start("alice", env("alice", "NO_COLOR=1"))

	// Summary.
	tm.waitFor("alice", "Dead letters by reason")
	s := tm.waitFor("alice", "pending 0")
	// The header names the login behind the --actor label: two people's
	// windows side by side never look alike.
	if !strings.Contains(s, "transient-exhausted") || !strings.Contains(s, "alice (login "+logins["alice"].Name+")") {
		t.Errorf("summary:\n%s", s)
	}

	// List: the hostile letter is the newest, its cells escaped.
	tm.keys("alice", "2")
	s = tm.waitFor("alice", "letter 1 of 121")
	if !strings.Contains(s, fmt.Sprint(hostile)) || !strings.Contains(s, "ERROR-CLASS") {
		t.Errorf("list:\n%s", s)
	}

	// Detail of the hostile letter.
	tm.keys("alice", "Enter")
	tm.waitFor("alice", fmt.Sprintf("Dead letter %d", hostile))
	s = tm.waitFor("alice", `\x1b]0;pwned\x07`)
	tuiAssertIntact(t, tm, s, fmt.Sprintf("2 Letters › %d", hostile))
	tm.keys("alice", "G")
	s = tm.waitFor("alice", "Payload (application/json")
	tuiAssertIntact(t, tm, s, fmt.Sprintf("2 Letters › %d", hostile))
	if !strings.Contains(s, `\x1b[2J\x1b[10;10H`) {
		t.Errorf("the payload should show its escapes as text:\n%s", s)
	}

	// Request form: rate and canary left to the policy, why given, the
	// handler check, the permanent-letter rule, the routing, the
	// watching of the dead-letter queue and the schedule left as they are.
	tm.keys("alice", "r")
	tm.waitFor("alice", fmt.Sprintf("Request a replay of dead letter %d", hostile))
	tm.keys("alice", "Enter", "Enter")
	tm.text("alice", "INC-4242 hostile letter")
	tm.keys("alice", "Enter", "Enter", "Enter", "Enter", "Enter", "Enter", "Enter")
	tm.waitFor("alice", "replay request 1 is pending: 1 letter;")

	// Alice may not approve her own request: the rule's words, no crash.
	tm.keys("alice", "3")
	tm.waitFor("alice", "INC-4242")
	tm.keys("alice", "a")
	tm.waitFor("alice", "Approve replay request 1")
	tm.text("alice", "mine")
	tm.keys("alice", "Enter")
	s = tm.waitFor("alice", "refused by rule four-eyes")
	if squeezed := strings.Join(strings.Fields(s), ""); !strings.Contains(squeezed, logins["alice"].Name+"requestedreplayrequest1andcannotreviewit") {
		t.Errorf("refusal:\n%s", s)
	}

	// Bob approves from a second terminal (with colours on).
	tm.start("bob", env("bob"))
	tm.waitFor("bob", "bob (login "+logins["bob"].Name+")")
	tm.keys("bob", "3")
	tm.waitFor("bob", "INC-4242")
	tm.keys("bob", "Enter")
	tm.waitFor("bob", "Replay request 1 — replay pending")
	tm.keys("bob", "a")
	tm.waitFor("bob", "Approve replay request 1")
	tm.text("bob", "checked with payments")
	tm.keys("bob", "Enter")
	tm.waitFor("bob", "replay request 1 is approved by bob")
	var status, reviewer string
	if err := db.Pool.QueryRow(context.Background(), `SELECT status, reviewed_by FROM expiryctl.replay_requests WHERE id = 1`).Scan(&status, &reviewer); err != nil {
		t.Fatal(err)
	}
	if status != "approved" || reviewer != "bob" {
		t.Errorf("request 1 is %s by %q, want approved by bob", status, reviewer)
	}
	// Alice's requests screen picks the approval up on its refresh tick.
	tm.waitFor("alice", " approved ")
	audited := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE actor = 'alice' AND action = 'dlq.show' AND target = $1`,
		fmt.Sprintf("dead_letter:%d", hostile))
	if audited < 1 {
		t.Errorf("opening the letter left no dlq.show audit row")
	}

	// A database outage: a banner, the keys still work, and it clears by
	// itself once the database is back.
	admin := pgtest.Connect(t, pgtest.AdminURL())
	outage := func(on bool) {
		t.Helper()
		allow := map[bool]string{true: "false", false: "true"}[on]
		if _, err := admin.Exec(withTimeout(t), "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" ALLOW_CONNECTIONS "+allow); err != nil {
			t.Fatal(err)
		}
		if on {
			if _, err := admin.Exec(withTimeout(t), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	outage(true)
	t.Cleanup(func() { outage(false) })
	tm.waitFor("alice", "database unavailable")
	tm.keys("alice", "1")
	tm.waitFor("alice", "stale: the last refresh failed")
	outage(false)
	// The last data stays on screen through the outage, so wait for the
	// banner to go, not for the data.
	tm.waitUntil("alice", "clear the outage banner once the database was back", func(s string) bool {
		return strings.Contains(s, "pending 0 · approved 1") && !strings.Contains(s, "database unavailable") &&
			!strings.Contains(s, "stale: the last refresh failed")
	})

	// Quit cleanly: exit status 0, alternate screen left.
	for _, pane := range []string{"alice", "bob"} {
		tm.keys(pane, "q")
		deadline := time.Now().Add(10 * time.Second)
		for tm.display(pane, "#{pane_dead}") != "1" {
			if time.Now().After(deadline) {
				t.Fatalf("%s's tui did not exit on q:\n%s", pane, tm.screen(pane))
			}
			time.Sleep(50 * time.Millisecond)
		}
		code, err := os.ReadFile(filepath.Join(tm.dir, pane+".status"))
		if err != nil || strings.TrimSpace(string(code)) != "0" {
			t.Errorf("%s's tui ended with status %q (%v), want 0:\n%s", pane, code, err, tm.screen(pane))
		}
		if alt := tm.display(pane, "#{alternate_on}"); alt != "0" {
			t.Errorf("%s's terminal is still in the alternate screen", pane)
		}
	}
}

var tuiPwned = regexp.MustCompile(`pwned`)

// tuiAssertIntact checks that a hostile letter on screen drove nothing: the
// pane title is not "pwned", the header is still on the first line and the
// help on the last (nothing cleared or moved), and "pwned" appears only as
// the escaped text of the title sequence.
func tuiAssertIntact(t *testing.T, tm *tuiTmux, screen, header string) {
	t.Helper()
	if title := tm.display("alice", "#{pane_title}"); strings.Contains(title, "pwned") {
		t.Errorf("the hostile payload set the pane title to %q", title)
	}
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) != 30 {
		t.Errorf("screen has %d lines, want 30:\n%s", len(lines), screen)
	}
	if !strings.Contains(lines[0], header) || !strings.Contains(lines[len(lines)-1], "? keys") {
		t.Errorf("header or help line moved:\n%s", screen)
	}
	for _, loc := range tuiPwned.FindAllStringIndex(screen, -1) {
		if loc[0] < 3 || screen[loc[0]-3:loc[0]] != "]0;" {
			t.Errorf("\"pwned\" on screen outside its escaped sequence:\n%s", screen)
		}
	}
}
