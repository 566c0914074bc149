package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

var tuiQueueDepth = regexp.MustCompile(`target queue depth\s+\d+ in \S+\s+10000`)

// TestTUIRunQuitAndInterrupt drives a run from `expiryctl tui` in a real
// terminal (tmux), with the real runner, database and broker: a refusal's
// banner goes when the operator switches screens; the requests screen
// leaves one audit row per visit however often it refreshes; the run screen
// counts what the runner did; q with the run going asks, and keeping it
// keeps it; ctrl+c asks the same, and stopping ends the TUI with 130, says
// how to resume, and leaves the request resumable: nothing stays
// publishing, and `replay run` finishes it with no new approval.
func TestTUIRunQuitAndInterrupt(t *testing.T) {
	t.Parallel()
	tm := tuiNeedTmux(t)
	const letters = 40
	w := newReplayWorld(t, letters)
	req := w.request(t, replay.NewRequest{Rate: 2, Canary: intRef(0)})
	w.approve(t, req.ID)
	// The fixed worker consumes the work queue: a run needs a consumer
	// with a handler other than the one the letters died under.
	w.runWorker(t)
	alice := w.db.Login(t, "alice", "expiryctl_operator")
	tm.start("alice", []string{"EXPIRYCTL_DATABASE_URL=" + alice.URL, "EXPIRYCTL_AMQP_URL=" + amqptest.URL(),
		"EXPIRYCTL_ACTOR=alice", "TERM=screen-256color", "NO_COLOR=1"})
	tm.waitFor("alice", "Dead letters by reason")
	listed := func() int {
		return count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE actor = 'alice' AND action = 'replay.list'`)
	}

	// The requests screen: one audit row for the visit, none for the
	// refreshes (every 2 s) while the operator stays on it.
	before := listed()
	tm.keys("alice", "3")
	tm.waitFor("alice", "INC-7 database failover")
	time.Sleep(5 * time.Second)
	if n := listed() - before; n != 1 {
		t.Errorf("a visit of the requests screen of 5 s (two refreshes) left %d replay.list rows, want 1", n)
	}

	// alice is no approver: the refusal's banner is the requests screen's
	// and goes when she switches to the summary.
	tm.keys("alice", "a")
	tm.waitFor("alice", "Approve replay request 1")
	tm.text("alice", "mine")
	tm.keys("alice", "Enter")
	tm.waitFor("alice", "refused by rule")
	tm.keys("alice", "1")
	tm.waitUntil("alice", "clear the refusal's banner on switching", func(s string) bool {
		return strings.Contains(s, "[1 Summary]") && !strings.Contains(s, "refused by rule")
	})

	// The run.
	tm.keys("alice", "3")
	tm.waitFor("alice", "INC-7 database failover")
	tm.keys("alice", "g")
	tm.waitFor("alice", "Run of replay request 1 — running")
	tm.waitUntil("alice", "show the run's first publishes", func(s string) bool {
		return strings.Contains(s, "published") && !strings.Contains(s, "published 0 this run")
	})
	// The depth the run shows is what its check read, of the queue it
	// names, once it read it; the depth can be read within the run's first
	// second, so the screen is taken once a second has passed too.
	s := tm.waitUntil("alice", "show the depth its check read and a second gone", func(s string) bool {
		return tuiQueueDepth.MatchString(s) && !strings.Contains(s, "elapsed 0s")
	})
	if !strings.Contains(s, "/s on average") {
		t.Errorf("the run screen shows no rate or no time:\n%s", s)
	}

	// q asks; k keeps the run and the TUI.
	tm.keys("alice", "q")
	tm.waitFor("alice", "Quit while replay request 1 is running?")
	tm.keys("alice", "k")
	s = tm.waitFor("alice", "Run of replay request 1 — running")
	if tm.display("alice", "#{pane_dead}") == "1" {
		t.Fatalf("k quit the TUI:\n%s", s)
	}

	// ctrl+c asks the same; s stops the run cleanly and ends with 130.
	tm.keys("alice", "C-c")
	tm.waitFor("alice", "Quit while replay request 1 is running?")
	tm.keys("alice", "s")
	deadline := time.Now().Add(60 * time.Second)
	for tm.display("alice", "#{pane_dead}") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("the tui did not exit after stopping its run:\n%s", tm.screen("alice"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, err := os.ReadFile(filepath.Join(tm.dir, "alice.status"))
	if err != nil || strings.TrimSpace(string(code)) != "130" {
		t.Errorf("ctrl+c ended the tui with status %q (%v), want 130:\n%s", code, err, tm.screen("alice"))
	}
	if s := strings.Join(strings.Fields(tm.screen("alice")), " "); !strings.Contains(s, "resume it with `expiryctl replay run 1`") {
		t.Errorf("the tui did not say how to resume the run:\n%s", s)
	}

	// Resumable: still running, nothing left publishing, some left to do;
	// `replay run` finishes it without a new approval.
	if got := w.status(t, req.ID); got != string(replay.StatusRunning) {
		t.Errorf("request 1 is %s after the stop, want running (resumable)", got)
	}
	states := itemStates(t, w.db.Pool, req.ID)
	if states["publishing"] != 0 || states["pending"] == 0 || states["confirmed"] == 0 {
		t.Errorf("item states after the stop %v: want some confirmed, the rest pending, none publishing", states)
	}
	newCLI(alice.URL, "alice").ok(t, "replay", "run", "1")
	if got := w.status(t, req.ID); got != string(replay.StatusCompleted) {
		t.Errorf("request 1 is %s after `replay run`, want completed", got)
	}
}
