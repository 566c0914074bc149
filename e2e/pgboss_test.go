package e2e_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// pgbossExpiry is the contract's expiry job as a pg-boss job's data.
type pgbossExpiry struct {
	ReservationID  string `json:"reservation_id"`
	HoldUntil      string `json:"hold_until"`
	IdempotencyKey string `json:"idempotency_key"`
}

// TestPgBossIncident runs a pg-boss incident through the CLI, as people:
// a real pg-boss worker fails contract jobs for good (retryLimit 1: two
// attempts); the ingester captures them from pg-boss's database without
// changing it, twice, and stores each once; alice asks for their replay
// and bob approves it; meanwhile someone else retries one job with
// pg-boss's own retry(). alice's run retries the others in place, skips
// that one and says why, and the worker, fixed, runs each job exactly
// once, as it ran pg-boss's own retry. The poisoned job fails again and
// comes back as a new letter linked to the first and to the replay.
func TestPgBossIncident(t *testing.T) {
	t.Parallel()
	const n = 4
	const poisoned = "r-boss-3"
	boss, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 1, "retryDelay": 0})
	b.Work()
	sent := make([]pgbossExpiry, n)
	payloads := make([][]byte, n)
	for i := range n {
		sent[i] = pgbossExpiry{ReservationID: fmt.Sprintf("r-boss-%d", i), HoldUntil: "2026-11-30T12:20:00Z",
			IdempotencyKey: fmt.Sprintf("expire:r-boss-%d:v1", i)}
		data, err := json.Marshal(sent[i])
		if err != nil {
			t.Fatal(err)
		}
		payloads[i] = data
	}
	ids := b.SendJobs(nil, payloads...)
	for _, id := range ids {
		b.WaitState(id, "failed")
	}
	if got := len(b.Seen("failing")); got != 2*n {
		t.Fatalf("the worker failed %d attempts, want 2 of each of the %d jobs", got, n)
	}
	before := boss.TableDigest(t)

	db := pgtest.New(t)
	// The archive knows the systems its migrations seed; pg-boss, a
	// driver's, is registered by `expiryctl migrate`, which the schema's
	// owner runs after an upgrade.
	if m := newCLI(pgtest.WithUser(db.URL, pgtest.Owner), "").ok(t, "migrate"); !regexp.MustCompile(`registered \d+ queue systems?: .*\bpgboss\b`).MatchString(m.stderr) {
		t.Errorf("migrate should register pg-boss: %s", m)
	}
	// The run watches its retried jobs for 3 s after the last: long
	// enough for its capture of the queue, which polls every 500 ms, to
	// see the poisoned job fail again after the worker's next poll.
	setPolicy(t, db, "canary_window=3s")
	// pg-boss's database is the operator's connection "boss": the
	// capture's URL reaches its server, so the letters name it, and the
	// run reaches it by that name.
	config := configFile(t, map[string]connection{"boss": {system: "pgboss", url: boss.URL}})
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "").withConfig(config)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "").withConfig(config)
	bob := newCLI(db.Login(t, "bob", "expiryctl_approver").URL, "").withConfig(config)
	queue := pgbosstest.URLFor(t, boss.URL, "expiry")
	name := "pgboss://boss/expiry"

	// A queue pg-boss does not know is refused as a RabbitMQ queue that
	// does not exist is, not captured as an empty one.
	typo := ingester.exits(t, 3, "dlq", "ingest", "--queue", pgbosstest.URLFor(t, boss.URL, "expirey"))
	if !strings.Contains(typo.stderr, `did you mean "expiry"?`) {
		t.Errorf("a mistyped pg-boss queue: %s", typo)
	}
	captureTwice(t, ingester, queue, n)
	// The test reaches pg-boss's database as a superuser, which the
	// capture says, as it says it of the archive's login.
	if again := ingester.ok(t, "dlq", "ingest", "--queue", queue); !strings.Contains(again.stderr, `warning: connection "boss" logs in as postgres (superuser)`) {
		t.Errorf("a capture through a superuser's connection says nothing of it: %s", again)
	}
	if after := boss.TableDigest(t); after != before {
		t.Error("capture changed pg-boss's tables")
	}

	var listed []listedLetter
	decodeJSON(t, alice.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	if len(listed) != n {
		t.Fatalf("%d letters archived for %d failed jobs", len(listed), n)
	}
	letterOf := map[string]int64{}
	var letters []string
	for _, l := range listed {
		i := slices.Index(ids, l.MessageID)
		if i < 0 {
			t.Fatalf("letter %d is of job %q, which the test did not send (%v)", l.ID, l.MessageID, ids)
		}
		if l.SourceQueue != name || l.Attempts != 2 || l.ReservationID != sent[i].ReservationID {
			t.Errorf("dlq list's letter %d: queue %q, %d attempts, reservation %q; want %s, 2, %s",
				l.ID, l.SourceQueue, l.Attempts, l.ReservationID, name, sent[i].ReservationID)
		}
		var shown jobShown
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(l.ID, 10), "-o", "json"), &shown)
		if shown.System != "pgboss" || shown.SourceQueue != name || shown.MessageID != ids[i] || shown.Native["name"] != "expiry" ||
			shown.Native["state"] != "failed" || shown.Native["retry_limit"] != "1" {
			t.Errorf("letter %d: system %q, queue %q, job %q, native %v; want pgboss, %s, job %s of queue expiry, failed after retry_limit 1",
				l.ID, shown.System, shown.SourceQueue, shown.MessageID, shown.Native, name, ids[i])
		}
		// The payload is the job's data as pg-boss keeps it (jsonb's
		// text), byte for byte.
		kept, ok := b.Stored(payloads[i])
		var got pgbossExpiry
		if !ok || string(shown.Payload) != string(kept) || json.Unmarshal(shown.Payload, &got) != nil || got != sent[i] ||
			shown.IdempotencyKey != sent[i].IdempotencyKey {
			t.Errorf("letter %d: payload %q, idempotency key %q; want pg-boss's data %q", l.ID, shown.Payload, shown.IdempotencyKey, kept)
		}
		reason := fmt.Sprintf("db_timeout: reservation %s lock wait exceeded", sent[i].ReservationID)
		if shown.Category != "transient-exhausted" || shown.Attempts != 2 || shown.LastError != reason {
			t.Errorf("letter %d: %s after %d attempts, last error %q; want transient-exhausted after 2, %q",
				l.ID, shown.Category, shown.Attempts, shown.LastError, reason)
		}
		// pg-boss keeps the last attempt's error only, in its output.
		if h := shown.AttemptHistory; len(h) != 1 || h[0].Attempt != 2 || h[0].Error != reason || !strings.Contains(h[0].Trace, "pgboss_worker.js") {
			t.Errorf("letter %d: history %+v, want the second attempt's error and the worker's stack from pg-boss's output", l.ID, h)
		}
		letterOf[l.MessageID] = l.ID
		letters = append(letters, "--id", strconv.FormatInt(l.ID, 10))
	}
	// The summary's live states are pg-boss's own: the failed jobs wait
	// in its table, isolated, and none is ready.
	checkIsolated(t, alice, name, n)
	show := alice.ok(t, "dlq", "show", strconv.FormatInt(letterOf[ids[0]], 10))
	if want := "retried in place (pg-boss job " + ids[0] + ")"; !strings.Contains(show.stdout, want) {
		t.Errorf("dlq show does not say where the job replays to (%q):\n%s", want, show.stdout)
	}

	// Refused: a pg-boss job goes back as itself, to its own queue.
	refusal := alice.exits(t, 4, append(append([]string{"replay", "request"}, letters...), "--routing-key", "reservation-expiry",
		"--same-handler-ok", "pg-boss shows no handler versions", "--why", "INC-4412")...)
	if !strings.Contains(refusal.stderr, "refused by rule target") || !strings.Contains(refusal.stderr, "(pgboss)") {
		t.Errorf("a pg-boss replay to a queue of alice's choosing: %s", refusal)
	}

	var req struct {
		ID int64 `json:"id"`
	}
	decodeJSON(t, alice.ok(t, append(append([]string{"replay", "request"}, letters...),
		"--same-handler-ok", "pg-boss shows no handler versions: the fix is deployed", "--why", "INC-4412: the reservations database timed out",
		"--canary", "0", "-o", "json")...), &req)
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")

	// What the approver reads: jobs retried in place, nothing published
	// anywhere, on the requester's word for the handler, which is all
	// there is: pg-boss shows expiryctl no workers, so the check cannot
	// read who runs the queue.
	var shownReq struct {
		Handler struct {
			Allowed   bool   `json:"allowed"`
			Condition string `json:"condition"`
		} `json:"handler"`
	}
	decodeJSON(t, alice.ok(t, "replay", "show", id, "-o", "json"), &shownReq)
	if h := shownReq.Handler; !h.Allowed || h.Condition != replay.ConditionHandlerUnverified {
		t.Errorf("replay show's handler check: %+v; want unverified (pg-boss shows no workers), allowed on --same-handler-ok", h)
	}
	human := alice.ok(t, "replay", "show", id).stdout
	for _, want := range []string{"nothing: each failed job is retried where it is", `retried in place in "` + name + `"`,
		"consumed now by      unknown: pg-boss shows no handler versions", "SKIPPED (--same-handler-ok)"} {
		if !strings.Contains(human, want) {
			t.Errorf("replay show: no %q in\n%s", want, human)
		}
	}
	if strings.Contains(human, "exchange") {
		t.Errorf("replay show names an exchange for pg-boss jobs:\n%s", human)
	}

	// The fix is deployed but for the poisoned reservation, and someone
	// else retries job 1 with pg-boss's own retry().
	b.Succeed(poisoned)
	b.Retry(ids[1])
	b.WaitSeen("completed", ids[1])

	// The run sees the poisoned job fail again: one of the three it
	// retried, above the policy's re-dead ratio of 0.2, halts it.
	var summary replaySummary
	decodeJSON(t, alice.exits(t, 8, "replay", "run", id, "-o", "json"), &summary)
	if summary.Status != "halted" || summary.HaltCondition != "redead-ratio" || summary.Confirmed != n-1 || summary.Skipped != 1 {
		t.Errorf("replay run %d: %+v, want halted by the re-dead ratio with %d confirmed and the job retried elsewhere skipped", req.ID, summary, n-1)
	}
	state, why := replayItem(t, db, req.ID, letterOf[ids[1]])
	if state != "skipped" || !strings.Contains(why, "no longer the failed job captured") || !strings.Contains(why, "state completed") {
		t.Errorf("the job retried elsewhere: item %s (%q), want skipped saying it completed", state, why)
	}
	t.Logf("the job retried elsewhere: %s", why)

	// The poisoned job had one more attempt (a retry adds one to
	// retry_limit) and failed again.
	b.WaitSeen("completed", ids[0], ids[2])
	waitFor(t, 30*time.Second, "the poisoned job to fail again", func() bool {
		s := boss.Job(t, "expiry", ids[3])
		return s.State == "failed" && s.RetryCount == 2
	})
	// pg-boss stops once the jobs it runs have ended: its log then holds
	// every run there was, and a job that was to run again is still
	// waiting in the table.
	b.Quit()
	for i, id := range ids {
		want := "completed"
		if i == 3 {
			want = "failed"
		}
		if s := boss.Job(t, "expiry", id); s.State != want {
			t.Errorf("job %s is %s after the incident, want %s: a job would run again", id, s.State, want)
		}
	}
	completed := map[string]int{}
	var elsewhere pgbosstest.Event
	for _, e := range b.Seen("completed") {
		completed[e.ID]++
		if e.ID == ids[1] {
			elsewhere = e
		}
	}
	if want := map[string]int{ids[0]: 1, ids[1]: 1, ids[2]: 1}; !maps.Equal(completed, want) {
		t.Errorf("the worker completed %v, want each job but the poisoned one once: %v", completed, want)
	}
	// The replayed jobs reach the worker as pg-boss's own retry of job 1
	// did: their third attempt, one more than the queue allowed, with
	// their data.
	theirs := boss.Job(t, "expiry", ids[1])
	for _, e := range b.Seen("completed") {
		i := slices.Index(ids, e.ID)
		var data pgbossExpiry
		if err := json.Unmarshal(e.Data, &data); err != nil || data != sent[i] {
			t.Errorf("the worker ran job %s with data %s (%v), want %+v", e.ID, e.Data, err, sent[i])
		}
		ours := boss.Job(t, "expiry", e.ID)
		if e.RetryCount != 2 || e.RetryCount != elsewhere.RetryCount || ours.RetryLimit != 2 || ours.RetryLimit != theirs.RetryLimit {
			t.Errorf("job %s ran as retry %d (retry_limit %d), pg-boss's own retry of job %s as retry %d (retry_limit %d); want both the third attempt, of 2 retries",
				e.ID, e.RetryCount, ours.RetryLimit, ids[1], elsewhere.RetryCount, theirs.RetryLimit)
		}
	}
	failing := 0
	for _, e := range b.Seen("failing") {
		if e.ID == ids[3] {
			failing++
		}
	}
	if failing != 3 {
		t.Errorf("the poisoned job failed %d attempts, want 3: two before the replay, one after", failing)
	}
	if states := boss.States(t, "expiry"); !maps.Equal(states, map[string]int{"completed": n - 1, "failed": 1}) {
		t.Errorf("pg-boss's jobs by state: %v, want %d completed and the poisoned one failed", states, n-1)
	}

	ingester.ok(t, "dlq", "ingest", "--queue", queue)
	newest := newestLetter(t, db, n+1)
	var again jobShown
	decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(newest, 10), "-o", "json"), &again)
	first := letterOf[ids[3]]
	if again.MessageID != ids[3] || again.PreviousID == nil || *again.PreviousID != first || again.ReplayRequestID == nil || *again.ReplayRequestID != req.ID {
		t.Errorf("the job that failed again: letter %d of job %s, previous %v, request %v; want job %s linked to letter %d and request %d",
			newest, again.MessageID, again.PreviousID, again.ReplayRequestID, ids[3], first, req.ID)
	}
	if again.Attempts != 3 || len(again.AttemptHistory) != 1 || again.AttemptHistory[0].Attempt != 3 {
		t.Errorf("the job that failed again: %d attempts, history %+v; want its third, the one pg-boss keeps", again.Attempts, again.AttemptHistory)
	}
}
