package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// bullmqExpiry is the contract's expiry job as a BullMQ job's data. Its
// fields are in the order JSON.stringify writes them back, so that its
// encoding is the data BullMQ keeps, byte for byte.
type bullmqExpiry struct {
	ReservationID  string `json:"reservation_id"`
	HoldUntil      string `json:"hold_until"`
	IdempotencyKey string `json:"idempotency_key"`
}

// TestBullMQIncident runs a BullMQ incident through the CLI, as people: a
// real BullMQ Worker fails contract jobs (attempts: 2); the ingester
// captures them from Redis without changing it, twice, and stores each
// once; alice asks for their replay and bob approves it; meanwhile
// someone else retries one job with BullMQ's own Job.retry(). alice's run
// retries the others in place, skips that one and says why, and the
// Worker, fixed, runs each job exactly once, as it would run BullMQ's own
// retry. The poisoned job fails again and comes back as a new letter
// linked to the first and to the replay. It runs once with each BullMQ
// release the driver supports (bullmqtest.Packages), in parallel, each
// with that release's own Worker.
func TestBullMQIncident(t *testing.T) {
	t.Parallel()
	for _, pkg := range bullmqtest.Packages {
		t.Run(pkg.Name, func(t *testing.T) {
			t.Parallel()
			testBullMQIncident(t, bullmqtest.NewQueueFor(t, pkg))
		})
	}
}

func testBullMQIncident(t *testing.T, q bullmqtest.Queue) {
	ctx := context.Background()
	w := bullmqtest.StartWorker(t, q)
	const n = 4
	const poisoned = "r-bull-3"
	sent := make([][]byte, n)
	jobs := make([]map[string]any, n)
	for i := range n {
		data, err := json.Marshal(bullmqExpiry{ReservationID: fmt.Sprintf("r-bull-%d", i), HoldUntil: "2026-11-30T12:20:00Z",
			IdempotencyKey: fmt.Sprintf("expire:r-bull-%d:v1", i)})
		if err != nil {
			t.Fatal(err)
		}
		sent[i] = data
		jobs[i] = map[string]any{"name": "reservation_expiry", "data": json.RawMessage(data), "opts": map[string]any{"attempts": 2}}
	}
	ids := w.Add(jobs...)
	q.WaitFailed(t, n)
	for i, id := range ids {
		if got := q.Hash(t, id)["data"]; got != string(sent[i]) {
			t.Fatalf("BullMQ keeps job %s's data as %q, the test sent %q", id, got, sent[i])
		}
	}
	// The live Worker's stalled-job check writes its own keys meanwhile.
	digest := func() string { return q.Digest(t, "stalled-check", "stalled") }
	before := digest()

	db := pgtest.New(t)
	// The run watches its retried jobs for 3 s after the last: long enough
	// for its capture of the failed set, which polls every second, to see
	// the poisoned job fail again.
	setPolicy(t, db, "canary_window=3s")
	// Redis is the operator's connection "redis": the capture's URL is
	// its server's, so the letters name it, and the run reaches it by
	// that name.
	config := configFile(t, map[string]connection{"redis": {system: "bullmq", url: fmt.Sprintf("redis://%s/%d", q.Ref.Addr(), q.Ref.DB)}})
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "").withConfig(config)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "").withConfig(config)
	bob := newCLI(db.Login(t, "bob", "expiryctl_approver").URL, "").withConfig(config)

	name := "bullmq://redis/" + url.PathEscape(q.Ref.Prefix) + "/" + url.PathEscape(q.Ref.Queue)
	captureTwice(t, ingester, q.URL(), n)
	if digest() != before {
		t.Error("capture changed Redis")
	}

	var listed []listedLetter
	decodeJSON(t, alice.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	if len(listed) != n {
		t.Fatalf("%d letters archived for %d failed jobs", len(listed), n)
	}
	letterOf := map[string]int64{}
	var letters []string
	for _, l := range listed {
		var shown jobShown
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(l.ID, 10), "-o", "json"), &shown)
		job := shown.MessageID
		i := slices.Index(ids, job)
		if i < 0 {
			t.Fatalf("letter %d is of job %q, which the test did not add (%v)", l.ID, job, ids)
		}
		if shown.System != "bullmq" || shown.SourceQueue != name || shown.Native["name"] != "reservation_expiry" {
			t.Errorf("letter %d: system %q, queue %q, name %q", l.ID, shown.System, shown.SourceQueue, shown.Native["name"])
		}
		// The queue's meta names the release whose Worker failed the job.
		if v := shown.Native["bullmq_version"]; v != q.BullMQ.Version {
			t.Errorf("letter %d: BullMQ version %q, want %q, the release of the subtest's Worker", l.ID, v, q.BullMQ.Version)
		}
		if string(shown.Payload) != string(sent[i]) || shown.IdempotencyKey != fmt.Sprintf("expire:r-bull-%d:v1", i) {
			t.Errorf("letter %d: payload %q, idempotency key %q; want BullMQ's data %q byte for byte", l.ID, shown.Payload, shown.IdempotencyKey, sent[i])
		}
		reason := fmt.Sprintf("db_timeout: reservation r-bull-%d lock wait exceeded", i)
		if shown.Category != "transient-exhausted" || shown.Attempts != 2 || shown.LastError != reason {
			t.Errorf("letter %d: %s after %d attempts, last error %q; want transient-exhausted after 2, %q",
				l.ID, shown.Category, shown.Attempts, shown.LastError, reason)
		}
		if len(shown.AttemptHistory) != 2 {
			t.Errorf("letter %d: history %+v, want BullMQ's two stack traces", l.ID, shown.AttemptHistory)
		}
		for k, a := range shown.AttemptHistory {
			if a.Attempt != k+1 || a.Error != "Error: "+reason || !strings.Contains(a.Trace, "bullmq_worker.js") {
				t.Errorf("letter %d attempt %d: %+v, want the Worker's stack trace", l.ID, k+1, a)
			}
		}
		letterOf[job] = l.ID
		letters = append(letters, "--id", strconv.FormatInt(l.ID, 10))
	}
	// The summary's live states are BullMQ's own: the failed jobs wait in
	// the failed set, isolated, and none is ready.
	checkIsolated(t, alice, name, n)

	// Refused: a BullMQ job goes back as itself, to its own queue.
	refusal := alice.exits(t, 4, append(append([]string{"replay", "request"}, letters...), "--routing-key", "reservation-expiry",
		"--same-handler-ok", "BullMQ workers name no version", "--why", "INC-4411")...)
	if !strings.Contains(refusal.stderr, "target") {
		t.Errorf("a BullMQ replay to a queue of alice's choosing: %s", refusal)
	}

	// Refused when made: BullMQ's Workers name no version, so nothing
	// could show the run a fixed handler.
	unseen := alice.exits(t, 4, append(append([]string{"replay", "request"}, letters...), "--why", "INC-4411")...)
	if !strings.Contains(unseen.stderr, "handler-unseen") || !strings.Contains(unseen.stderr, "BullMQ shows the Workers") {
		t.Errorf("a BullMQ replay that does not vouch for the handler: %s", unseen)
	}

	var req struct {
		ID int64 `json:"id"`
	}
	decodeJSON(t, alice.ok(t, append(append([]string{"replay", "request"}, letters...),
		"--same-handler-ok", "BullMQ workers name no version: the fix is deployed", "--why", "INC-4411: the reservations database timed out",
		"--canary", "0", "-o", "json")...), &req)
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")

	// The handler check reads the Worker's connection from Redis: it is
	// there, and names no version, which the requester's
	// --same-handler-ok allows.
	var shownReq struct {
		Handler struct {
			Allowed     bool   `json:"allowed"`
			Condition   string `json:"condition"`
			ConsumedNow struct {
				Unavailable string `json:"unavailable"`
				Queues      []struct {
					Queue     string `json:"queue"`
					Consumers []struct {
						HandlerVersion string `json:"handler_version"`
					} `json:"consumers"`
				} `json:"queues"`
			} `json:"consumed_now"`
		} `json:"handler"`
	}
	decodeJSON(t, alice.ok(t, "replay", "show", id, "-o", "json"), &shownReq)
	workers, err := q.Ref.Workers(ctx, q.Client)
	if err != nil || len(workers) == 0 {
		t.Fatalf("Redis lists BullMQ workers %v (%v), want the Node Worker", workers, err)
	}
	h := shownReq.Handler
	if !h.Allowed || h.Condition != replay.ConditionSameHandler || h.ConsumedNow.Unavailable != "" || len(h.ConsumedNow.Queues) != 1 ||
		h.ConsumedNow.Queues[0].Queue != name || len(h.ConsumedNow.Queues[0].Consumers) != len(workers) {
		t.Errorf("replay show's handler check: %+v; want queue %s with its %d workers, none naming a version, allowed", h, name, len(workers))
	}
	for _, c := range h.ConsumedNow.Queues[0].Consumers {
		if c.HandlerVersion != "" {
			t.Errorf("a BullMQ worker advertised handler version %q", c.HandlerVersion)
		}
	}
	// What the approver reads: the Worker's connection, with no version,
	// and jobs retried in place rather than published anywhere.
	human := alice.ok(t, "replay", "show", id).stdout
	for _, want := range []string{"consumed now by      queue " + name + ": (none advertised) ×" + strconv.Itoa(len(workers)),
		"SKIPPED (--same-handler-ok)", "each failed job is retried where it is"} {
		if !strings.Contains(human, want) {
			t.Errorf("replay show: no %q in\n%s", want, human)
		}
	}
	if strings.Contains(human, "exchange") {
		t.Errorf("replay show names an exchange for BullMQ jobs:\n%s", human)
	}

	// The fix is deployed but for the poisoned reservation, and someone
	// else retries job 1 with BullMQ's own Job.retry().
	w.Succeed(poisoned)
	w.Retry(ids[1])
	w.WaitSeen("completed", ids[1])

	// The run sees the poisoned job fail again: one of the three it
	// retried, above the policy's re-dead ratio of 0.2, halts it.
	var summary replaySummary
	decodeJSON(t, alice.exits(t, 8, "replay", "run", id, "-o", "json"), &summary)
	if summary.Status != "halted" || summary.HaltCondition != "redead-ratio" || summary.Confirmed != n-1 || summary.Skipped != 1 {
		t.Errorf("replay run %d: %+v, want halted by the re-dead ratio with %d confirmed and the job retried elsewhere skipped", req.ID, summary, n-1)
	}
	state, why := replayItem(t, db, req.ID, letterOf[ids[1]])
	if state != "skipped" || !strings.Contains(why, "completed") {
		t.Errorf("the job retried elsewhere: item %s (%q), want skipped saying it completed", state, why)
	}
	t.Logf("the job retried elsewhere: %s", why)

	// The poisoned job had one more attempt (a retry keeps attemptsMade)
	// and failed again.
	w.WaitSeen("completed", ids[0], ids[2])
	waitFor(t, 30*time.Second, "the poisoned job to fail again", func() bool {
		return q.State(t, ids[3]) == "failed" && q.Hash(t, ids[3])["atm"] == "3"
	})
	// The Worker closes once the jobs it runs have ended: its log then
	// holds every run there was, and a job that was to run a second time
	// is still queued.
	w.Quit()
	for _, list := range []string{"wait", "paused", "active"} {
		if n := q.Client.LLen(ctx, q.Key(list)).Val(); n != 0 {
			t.Errorf("%d jobs in the %s list after the incident, want none: a job would run again", n, list)
		}
	}
	if n := q.Client.ZCard(ctx, q.Key("prioritized")).Val(); n != 0 {
		t.Errorf("%d jobs prioritized after the incident, want none: a job would run again", n)
	}
	completed := map[string]int{}
	var elsewhere bullmqtest.Event
	for _, e := range w.Seen("completed") {
		completed[e.ID]++
		if e.ID == ids[1] {
			elsewhere = e
		}
	}
	if want := map[string]int{ids[0]: 1, ids[1]: 1, ids[2]: 1}; !maps.Equal(completed, want) {
		t.Errorf("the Worker completed %v, want each job but the poisoned one once: %v", completed, want)
	}
	// The replayed jobs reach the Worker as BullMQ's own retry of job 1
	// did: attempts and traces kept, the failure's finishedOn and
	// failedReason gone.
	for _, e := range w.Seen("completed") {
		if e.AttemptsMade != 2 || e.AttemptsStarted != 3 || e.Stacktrace != 2 || e.FailedReason != nil || e.FinishedOn != nil {
			t.Errorf("job %s ran as attempt made %d, started %d, %d traces, failedReason %v, finishedOn %v; want an ordinary retry",
				e.ID, e.AttemptsMade, e.AttemptsStarted, e.Stacktrace, e.FailedReason, e.FinishedOn)
		}
		if e.ID != ids[1] && (e.AttemptsMade != elsewhere.AttemptsMade || e.AttemptsStarted != elsewhere.AttemptsStarted || e.Stacktrace != elsewhere.Stacktrace) {
			t.Errorf("replayed job %s ran unlike BullMQ's own retry of job %s: %+v, %+v", e.ID, ids[1], e, elsewhere)
		}
	}
	failing := 0
	for _, e := range w.Seen("failing") {
		if e.ID == ids[3] {
			failing++
		}
	}
	if failing != 3 {
		t.Errorf("the poisoned job failed %d attempts, want 3: two before the replay, one after", failing)
	}

	ingester.ok(t, "dlq", "ingest", "--queue", q.URL())
	newest := newestLetter(t, db, n+1)
	var again jobShown
	decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(newest, 10), "-o", "json"), &again)
	first := letterOf[ids[3]]
	if again.MessageID != ids[3] || again.PreviousID == nil || *again.PreviousID != first || again.ReplayRequestID == nil || *again.ReplayRequestID != req.ID {
		t.Errorf("the job that failed again: letter %d of job %s, previous %v, request %v; want job %s linked to letter %d and request %d",
			newest, again.MessageID, again.PreviousID, again.ReplayRequestID, ids[3], first, req.ID)
	}
	if again.Attempts != 3 || len(again.AttemptHistory) != 3 {
		t.Errorf("the job that failed again: %d attempts, history %+v; want its three", again.Attempts, again.AttemptHistory)
	}
}
