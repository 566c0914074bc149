package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// canaryWait is the progress line while the canary's window runs.
var canaryWait = regexp.MustCompile(`canary out, watching (\d+)s more for re-dead letters, ETA ([0-9hms]+)`)

// TestReplayRunInATerminal runs `replay run` in an 80-column terminal
// (tmux), as an operator: its progress stays one line of the pane, the
// canary window and the ETA count down together, and another operator's
// `replay show` says a runner holds it. Ctrl-C stops it with exit 130,
// and then `replay show` and `replay list`, read by that other operator,
// say that no runner holds the request and how to resume it.
func TestReplayRunInATerminal(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	const n = 40
	w := newReplayWorld(t, n, "canary_window=12s")
	req := w.request(t, replay.NewRequest{Rate: 4, Canary: intRef(2)})
	w.approve(t, req.ID)
	// The fixed worker consumes the target queue, as a run requires.
	w.runWorker(t)
	id := strconv.FormatInt(req.ID, 10)
	runner := w.db.Login(t, "runner", "expiryctl_operator")
	reader := newCLI(w.db.Login(t, "reader", "expiryctl_operator").URL, "reader")

	status := filepath.Join(tm.dir, "run.status")
	env := []string{"EXPIRYCTL_DATABASE_URL=" + runner.URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
		"EXPIRYCTL_ACTOR=runner", "TERM=screen-256color", "NO_COLOR=1"}
	// As in TestWatchInTerminal: the shell's trap lets it record the exit
	// status; the program gets Ctrl-C as from an interactive shell.
	cmd := "trap true INT; env " + strings.Join(quoteAll(env), " ") + " " + shellQuote(binPath) +
		" replay run " + id + "; echo $? > " + shellQuote(status)
	tm.run("new-session", "-d", "-s", "e2e", "-n", "run", "-x", "80", "-y", "24", cmd)
	tm.run("set-option", "-g", "remain-on-exit", "on")

	progress := regexp.MustCompile(`(?m)^replay ` + id + `: `)
	oneLine := func(what string) {
		t.Helper()
		history := tm.run("capture-pane", "-p", "-S", "-", "-t", "e2e:run")
		if got := len(progress.FindAllString(history, -1)); got != 1 {
			t.Errorf("%s, the pane holds %d progress lines, want 1:\n%s", what, got, history)
		}
		for _, l := range strings.Split(history, "\n") {
			if len([]rune(l)) > 79 {
				t.Errorf("%s, a line of %d cells in an 80-column pane: %q", what, len([]rune(l)), l)
			}
		}
	}

	// The canary's window and the ETA count down together.
	first := canaryWait.FindStringSubmatch(tm.waitUntil("run", "show the canary's wait", canaryWait.MatchString))
	left1, _ := strconv.Atoi(first[1])
	eta1, err := time.ParseDuration(first[2])
	if err != nil {
		t.Fatal(err)
	}
	var later []string
	tm.waitUntil("run", "count the canary's wait down by 2s", func(s string) bool {
		if later = canaryWait.FindStringSubmatch(s); later == nil {
			return false
		}
		left, _ := strconv.Atoi(later[1])
		return left <= left1-2
	})
	eta2, err := time.ParseDuration(later[2])
	if err != nil {
		t.Fatal(err)
	}
	if eta2 >= eta1 {
		t.Errorf("the ETA went from %s to %s while the canary's window went from %ss to %ss: it should count down", eta1, eta2, first[1], later[1])
	}
	oneLine("during the canary's wait")

	// Another operator sees that a runner holds it.
	var shown struct {
		Status     string `json:"status"`
		RunnerHeld *bool  `json:"runner_held"`
		Runner     string `json:"runner"`
	}
	decodeJSON(t, reader.ok(t, "replay", "show", id, "-o", "json"), &shown)
	if shown.Status != "running" || shown.RunnerHeld == nil || !*shown.RunnerHeld || !strings.Contains(shown.Runner, "replay run by runner@") {
		t.Errorf("while it runs, replay show -o json says status %s, runner_held %v, runner %q", shown.Status, shown.RunnerHeld, shown.Runner)
	}

	// Publishing after the canary, the line is still one line.
	done := regexp.MustCompile(`replay ` + id + `: (\d+)/40 done`)
	tm.waitUntil("run", "publish past the canary", func(s string) bool {
		m := done.FindStringSubmatch(s)
		if m == nil {
			return false
		}
		k, _ := strconv.Atoi(m[1])
		return k >= 6 && !strings.Contains(s, "canary")
	})
	oneLine("while publishing")

	tm.run("send-keys", "-t", "e2e:run", "C-c")
	waitFor(t, 20*time.Second, "replay run to stop on Ctrl-C", func() bool {
		b, err := os.ReadFile(status)
		return err == nil && strings.TrimSpace(string(b)) != ""
	})
	if code, _ := os.ReadFile(status); strings.TrimSpace(string(code)) != "130" {
		t.Errorf("replay run stopped by Ctrl-C exited %s, want 130:\n%s", code, tm.screen("run"))
	}
	states := itemStates(t, w.db.Pool, req.ID)
	if states["confirmed"] >= n || states["pending"] == 0 {
		t.Fatalf("item states %v: the run should have stopped part way", states)
	}

	show := reader.ok(t, "replay", "show", id)
	for _, want := range []string{"running (no runner)", "none: no process runs this request", "resume it with `expiryctl replay run " + id + "`"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("replay show after Ctrl-C lacks %q:\n%s", want, show.stdout)
		}
	}
	shown.RunnerHeld, shown.Runner = nil, ""
	decodeJSON(t, reader.ok(t, "replay", "show", id, "-o", "json"), &shown)
	if shown.Status != "running" || shown.RunnerHeld == nil || *shown.RunnerHeld || shown.Runner != "" {
		t.Errorf("after Ctrl-C, replay show -o json says status %s, runner_held %v, runner %q", shown.Status, shown.RunnerHeld, shown.Runner)
	}
	list := reader.ok(t, "replay", "list")
	if want := "replay request " + id + " is running, but no runner holds it"; !strings.Contains(list.stderr, want) ||
		!strings.Contains(list.stderr, "`expiryctl replay run "+id+"`") {
		t.Errorf("replay list after Ctrl-C should say %q and how to resume: %s", want, list)
	}
}
