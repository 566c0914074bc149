package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestRiverReplayKilledRetriesEachJobOnce kills `replay run` of River
// letters with SIGKILL at random moments, between a retry's commit in
// River's database and its confirm in the archive too, and runs it again
// after each kill. However often it died, the fixed River worker runs each
// job once at most, and exactly once for each item the run confirmed: a
// retry whose confirm a kill lost is found by its marks on the job and
// confirmed without a second retry.
func TestRiverReplayKilledRetriesEachJobOnce(t *testing.T) {
	t.Parallel()
	const (
		n        = 120
		minKills = 8
	)
	rw := newRiverWorld(t, n, "")
	db := pgtest.New(t)
	changes, err := replay.ParsePolicyChanges([]string{"canary_window=300ms", "max_rate=200"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(withTimeout(t), db.Pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "").withConfig(rw.config)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "").withConfig(rw.config)
	bob := newCLI(db.Login(t, "bob", "expiryctl_approver").URL, "").withConfig(rw.config)
	ingester.ok(t, "dlq", "ingest", "--queue", rw.queue)
	var req struct {
		ID    int64 `json:"id"`
		Items int   `json:"items"`
	}
	decodeJSON(t, alice.ok(t, "replay", "request", "--reason", "transient-exhausted", "--max", strconv.Itoa(n), "--rate", "150",
		"--same-handler-ok", "River shows no workers: the fix is deployed", "--why", "INC-4411", "--canary", "5", "-o", "json"), &req)
	if req.Items != n {
		t.Fatalf("request %d holds %d items, want %d", req.ID, req.Items, n)
	}
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")
	rw.w.succeed.Store(true)

	rng := rand.New(rand.NewPCG(seed(t), 0))
	var (
		kills int
		trail []string
		final result
	)
	for run := 1; ; run++ {
		if run > 6*minKills {
			t.Fatalf("gave up after %d runs with %d kills: %s", run-1, kills, strings.Join(trail, ", "))
		}
		if kills >= minKills {
			final = alice.run(t, "replay", "run", id, "-o", "json")
		} else {
			delay := time.Duration(40+rng.IntN(300)) * time.Millisecond
			p := alice.start(t, "replay", "run", id, "-o", "json")
			time.Sleep(delay)
			if !p.exited() {
				p.signal(syscall.SIGKILL)
				if res := p.wait(10 * time.Second); res.code != -1 {
					t.Fatalf("run %d should have died of SIGKILL: %s", run, res)
				}
				kills++
				states := itemStates(t, db.Pool, req.ID)
				trail = append(trail, fmt.Sprintf("kill after %s: %d confirmed, %d publishing", delay, states["confirmed"], states["publishing"]))
				continue
			}
			final = p.wait(time.Second)
		}
		if final.code == 4 && strings.Contains(final.stderr, "single-runner") {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if final.code != 0 && (final.code != 1 || !strings.Contains(final.stderr, "completed, but")) {
			t.Fatalf("run %d: %s", run, final)
		}
		break
	}
	var summary replaySummary
	decodeJSON(t, final, &summary)
	// No item fails by rule publish-bound: sending a job store's item
	// again retries its job at most once, so the bound spares it.
	if summary.Status != "completed" || summary.Confirmed != n {
		t.Fatalf("final run: %+v, want completed with all %d confirmed", summary, n)
	}
	resent := count(t, db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND sends >= $2`, req.ID, replay.PublishBound)
	waitFor(t, 30*time.Second, "the retried jobs to run", func() bool {
		return rw.states(t)["completed"] >= summary.Confirmed && rw.states(t)["available"] == 0 && rw.states(t)["running"] == 0
	})
	time.Sleep(300 * time.Millisecond)
	jobOfLetter := map[int64]int64{}
	rows, err := db.Pool.Query(withTimeout(t), `SELECT i.dead_letter_id, (d.native->>'job_id')::bigint, i.state
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id WHERE i.request_id = $1`, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := map[int64]bool{}
	for rows.Next() {
		var letter, job int64
		var state string
		if err := rows.Scan(&letter, &job, &state); err != nil {
			t.Fatal(err)
		}
		jobOfLetter[letter] = job
		confirmed[job] = state == "confirmed"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	twice := 0
	for _, job := range rw.jobs {
		runs := rw.w.runsAfter(job)
		switch {
		case runs > 1:
			twice++
			t.Errorf("job %d ran %d times after the replay, want once", job, runs)
		case confirmed[job] && runs != 1:
			t.Errorf("job %d: its item was confirmed, but the worker ran it %d times", job, runs)
		}
	}
	t.Logf("River replay crash test: %d kills, %d confirmed, %d sent as often as the bound, or more, %d jobs run twice; after each kill: %s",
		kills, summary.Confirmed, resent, twice, strings.Join(trail, "; "))
	if r := alice.run(t, "audit", "verify"); r.code != 0 {
		t.Errorf("the trail does not verify after the kills: %s", r)
	}
}
