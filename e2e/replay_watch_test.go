package e2e_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// incidentLetters is the size of issue 32's incident.
const incidentLetters = 40

// newIncident is issue 32's incident: incidentLetters letters, approved
// as nr under policy, whose reservations no longer exist, so that the fixed
// reference worker dead-letters every replayed job again (not_found). It
// returns the world, the approved request and olga, an operator in no
// other group, who runs it.
func newIncident(t *testing.T, nr replay.NewRequest, policy ...string) (*replayWorld, replay.Request, *cli) {
	t.Helper()
	w := newReplayWorld(t, incidentLetters, policy...)
	req := w.request(t, nr)
	w.approve(t, req.ID)
	if _, err := w.db.Pool.Exec(withTimeout(t), `DELETE FROM reservations.reservations`); err != nil {
		t.Fatal(err)
	}
	w.runWorker(t)
	return w, req, newCLI(w.db.GrantedLogin(t, "olga", "expiryctl_operator").URL, "")
}

// TestReplayIncidentJobsDieAgainWithoutFollow is issue 32's incident: 40
// letters whose reservations no longer exist are replayed into the fixed
// reference worker, which dead-letters every job again (not_found), and
// no `dlq ingest --follow` runs. `replay run`, run by an operator in no
// other group, captures the DLQ itself, halts on the re-dead ratio (exit
// 8) rather than saying completed, and `replay show`, `replay list` and
// the DLQ agree on what came back.
func TestReplayIncidentJobsDieAgainWithoutFollow(t *testing.T) {
	t.Parallel()
	w, req, olga := newIncident(t, replay.NewRequest{Rate: 50, Canary: intRef(4)}, "canary_window=3s")
	id := strconv.FormatInt(req.ID, 10)

	res := olga.exits(t, 8, "replay", "run", id, "-o", "json")
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "halted" || got.HaltCondition != replay.ConditionRedeadRatio {
		t.Fatalf("run %+v: want halted on %s\n%s", got, replay.ConditionRedeadRatio, res)
	}
	t.Logf("replay run said: %s", strings.TrimSpace(res.stderr))
	back := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
	if back == 0 || back > got.Confirmed {
		t.Fatalf("%d letters of the request captured again, want 1 to the %d confirmed", back, got.Confirmed)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'
		AND (details->>'by_run')::boolean`); c == 0 {
		t.Error("no capture batch says by_run: the letters came back some other way")
	}

	show := olga.ok(t, "replay", "show", id)
	for _, want := range []string{
		"dead letters back    captured by the run",
		"came back            " + strconv.Itoa(back) + " of the " + strconv.Itoa(got.Confirmed) + " confirmed died again",
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("replay show has no %q:\n%s", want, show.stdout)
		}
	}
	var listed []struct {
		ID    int64 `json:"id"`
		Fates *struct {
			Confirmed int `json:"confirmed"`
			CameBack  int `json:"came_back"`
			Unknown   int `json:"unknown"`
		} `json:"fates"`
	}
	decodeJSON(t, olga.ok(t, "replay", "list", "-o", "json"), &listed)
	if len(listed) != 1 || listed[0].Fates == nil || listed[0].Fates.CameBack != back || listed[0].Fates.Confirmed != got.Confirmed {
		t.Errorf("replay list -o json: %+v, want request %d with %d of %d came back", listed, req.ID, back, got.Confirmed)
	}
	table := olga.ok(t, "replay", "list")
	if !strings.Contains(table.stdout, strconv.Itoa(back)+" back") {
		t.Errorf("replay list does not say how many came back:\n%s", table.stdout)
	}
}

// TestReplayIncidentWithFollowToo is the same incident with a `dlq ingest
// --follow` capturing the DLQ beside the run, as before issue 32: the run
// halts the same way, the two consumers share the letters that come back,
// and each is stored once, none lost: the archive plus what is left in the
// queue is every job the worker dead-lettered.
func TestReplayIncidentWithFollowToo(t *testing.T) {
	t.Parallel()
	w, req, olga := newIncident(t, replay.NewRequest{Rate: 50, Canary: intRef(4)}, "canary_window=3s")
	id := strconv.FormatInt(req.ID, 10)
	follow := w.cli.start(t, "dlq", "ingest", "--queue", w.topo.DeadLetterQueue, "--follow", "--batch", "1")

	res := olga.exits(t, 8, "replay", "run", id, "-o", "json")
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "halted" || got.HaltCondition != replay.ConditionRedeadRatio {
		t.Fatalf("run %+v: want halted on %s\n%s", got, replay.ConditionRedeadRatio, res)
	}
	t.Logf("replay run said, with --follow beside it: %s", strings.TrimSpace(res.stderr))
	archived := func() int {
		return count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
	}
	waitFor(t, 20*time.Second, "every published job to come back and be captured", func() bool { return archived() >= got.Published })
	follow.signal(syscall.SIGTERM)
	if r := follow.wait(10 * time.Second); r.code != 0 {
		t.Fatalf("dlq ingest --follow did not stop cleanly: %s", r)
	}
	back := archived()
	distinct := count(t, w.db.Pool, `SELECT count(DISTINCT job_key) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
	if back != got.Published || distinct != back {
		t.Errorf("%d letters of the request archived (%d jobs), want each of the %d published jobs once", back, distinct, got.Published)
	}
	byRun := count(t, w.db.Pool, `SELECT coalesce(sum((details->>'stored')::int), 0) FROM expiryctl.audit_log
		WHERE action = 'dlq.ingest.batch' AND (details->>'by_run')::boolean`)
	t.Logf("of the %d that came back, the run captured %d and the follower %d", back, byRun, back-byRun)
}

// TestReplayCaptureKilled kills `replay run` with SIGKILL while its own
// capture takes the letters of the incident coming back, at a different
// point in each round: every job the worker dead-lettered again is then
// either archived once or still in the DLQ (a letter received and not
// committed was never acknowledged), and a `dlq ingest` afterwards archives
// the rest: the 40 exactly, none twice.
func TestReplayCaptureKilled(t *testing.T) {
	t.Parallel()
	for _, killAfter := range []int{1, 9, 23} {
		t.Run(strconv.Itoa(killAfter), func(t *testing.T) {
			t.Parallel()
			// The whole cohort is the canary, its window long and the
			// re-dead ratio never reached: the run waits, capturing.
			w, req, olga := newIncident(t, replay.NewRequest{Rate: 200, Canary: intRef(incidentLetters)},
				"canary_window=60s", "stop_redead_ratio=1")
			id := strconv.FormatInt(req.ID, 10)
			archived := func() int {
				return count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
			}
			run := olga.start(t, "replay", "run", id)
			waitFor(t, 30*time.Second, "the run to capture "+strconv.Itoa(killAfter)+" letters", func() bool { return archived() >= killAfter })
			run.signal(syscall.SIGKILL)
			run.wait(10 * time.Second)
			atKill := archived()

			// The worker goes on dead-lettering what it still holds: every
			// job the broker confirmed dies again, and perhaps one or two
			// sent without a recorded confirm. A batch committed whose ack
			// the kill cut off is in both the archive and the DLQ: the
			// broker delivers it again, and a capture skips its copy.
			confirmed := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
			sent := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND sends > 0`, req.ID)
			left := func() int { return queueReady(t, amqptest.URL(), w.topo.DeadLetterQueue) }
			waitFor(t, 30*time.Second, "every confirmed job to be archived or back in the DLQ", func() bool { return archived()+left() >= confirmed })
			time.Sleep(2 * time.Second) // what was sent without a confirm recorded
			afterKill, inDLQ := archived(), left()
			if distinct := count(t, w.db.Pool, `SELECT count(DISTINCT job_key) FROM expiryctl.dead_letters WHERE replay_request_id = $1`,
				req.ID); distinct != afterKill {
				t.Errorf("%d letters archived for %d jobs: a letter was stored twice", afterKill, distinct)
			}
			w.cli.ok(t, "dlq", "ingest", "--queue", w.topo.DeadLetterQueue)
			got := archived()
			distinct := count(t, w.db.Pool, `SELECT count(DISTINCT job_key) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
			if got < confirmed || got > sent || distinct != got || left() != 0 {
				t.Errorf("after the kill and a capture: %d archived (%d jobs), %d left in the DLQ; want each of the %d confirmed (at most the %d sent) once",
					got, distinct, left(), confirmed, sent)
			}
			t.Logf("killed with %d archived by the run, %d of %d confirmed; then %d archived and %d in the DLQ; after a capture %d archived, none twice",
				atKill, confirmed, incidentLetters, afterKill, inDLQ, got)
		})
	}
}

// TestReplayResumedInWatchWindow kills `replay run` with SIGKILL after the
// broker confirmed its whole cohort, in the watch window after its last
// publish, before any job died again: the worker is deployed only after
// the kill, and dead-letters every job. The resumed run has nothing left
// to publish, yet it owes the window: it captures the DLQ of the items
// the killed leg confirmed, judges the re-dead ratio over them, and halts
// (exit 8) instead of saying completed over a queue of new dead letters.
func TestReplayResumedInWatchWindow(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t, incidentLetters, "canary_window=90s", "stop_queue_depth=100000")
	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(0),
		SameHandlerWhy: "resume test: the fixed worker is deployed after the publish"})
	w.approve(t, req.ID)
	if _, err := w.db.Pool.Exec(withTimeout(t), `DELETE FROM reservations.reservations`); err != nil {
		t.Fatal(err)
	}
	olga := newCLI(w.db.GrantedLogin(t, "olga", "expiryctl_operator").URL, "")
	id := strconv.FormatInt(req.ID, 10)
	confirmed := func() int {
		return count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	}

	run := olga.start(t, "replay", "run", id)
	waitFor(t, 30*time.Second, "the broker to confirm the whole cohort", func() bool { return confirmed() == incidentLetters })
	run.signal(syscall.SIGKILL)
	run.wait(10 * time.Second)
	if s := w.status(t, req.ID); s != "running" {
		t.Fatalf("after the kill the request is %s, want running", s)
	}

	w.runWorker(t)
	waitFor(t, 30*time.Second, "the worker to dead-letter every replayed job", func() bool {
		return queueReady(t, amqptest.URL(), w.topo.DeadLetterQueue) == incidentLetters
	})

	res := olga.exits(t, 8, "replay", "run", id, "-o", "json")
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "halted" || got.HaltCondition != replay.ConditionRedeadRatio {
		t.Fatalf("resumed run %+v: want halted on %s\n%s", got, replay.ConditionRedeadRatio, res)
	}
	back := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
	if back == 0 {
		t.Fatal("the resumed run captured none of the jobs that died again")
	}
	t.Logf("resumed in its watch window, the run captured %d of the %d that came back and said: %s",
		back, incidentLetters, strings.TrimSpace(res.stderr))
}
