package bullmq_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/replay"
)

// newRetrier is a retrier that reaches the queues of q's connection, as
// a configuration naming q's Redis resolves them, closed in cleanup.
func newRetrier(t testing.TB, q bullmqtest.Queue) *bullmq.Retrier {
	t.Helper()
	r := bullmq.NewRetrier(q.Resolve())
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// replayOf is the runner's message retrying the job a delivery captured,
// as item item of request request.
func replayOf(m deadletter.Message, request, item int64) replay.Message {
	return replay.Message{System: bullmq.System, RoutingKey: m.Queue, Item: item, Body: m.Body,
		Headers: map[string]any{replay.HeaderReplayRequest: request, replay.HeaderReplayItem: item, replay.HeaderReplayCount: int64(1),
			replay.HeaderReplayedBy: "alice", replay.HeaderApprovedBy: "bob"},
		Job: replay.JobRef{ID: m.Native[deadletter.NativeJobID], Incarnation: m.Native[deadletter.NativeIncarnation]}}
}

// publish publishes m and waits for its outcome.
func publish(t testing.TB, r *bullmq.Retrier, m replay.Message) error {
	t.Helper()
	p, err := r.Publish(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome in 10 s")
	}
	return p.Outcome()
}

// captured reads q's failed jobs as capture does, by id.
func captured(t *testing.T, q bullmqtest.Queue, n int) map[string]deadletter.Message {
	t.Helper()
	src := openSource(t, q, bullmq.SourceOptions{})
	out := map[string]deadletter.Message{}
	for _, d := range receive(t, src, n) {
		out[d.Message.MessageID] = d.Message
	}
	_ = src.Close()
	return out
}

// TestRetrierRetriesAsBullMQDoes: a retried job leaves the failed set for
// where BullMQ's retry puts it (wait, by LIFO at the end a worker takes
// next; prioritized by its priority), loses what its run left, keeps its
// attempts, carries the replay's marks, wakes a worker (marker) and is
// announced as waiting from failed; the same in BullMQ 5 and 6.
func TestRetrierRetriesAsBullMQDoes(t *testing.T) {
	t.Parallel()
	for _, version := range bullmq.TestedVersions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			testRetrierRetriesAsBullMQDoes(t, version)
		})
	}
}

func testRetrierRetriesAsBullMQDoes(t *testing.T, version string) {
	q := bullmqtest.NewQueue(t)
	q.Client.RPush(t.Context(), q.Key("wait"), "w1")
	seed(t, q, version, failedJob{ID: "1"}, failedJob{ID: "2", Opts: `{"attempts":2,"lifo":true}`},
		failedJob{ID: "3", Priority: 5, Opts: `{"attempts":2,"priority":5}`})
	jobs := captured(t, q, 3)
	r := newRetrier(t, q)
	for i, id := range []string{"1", "2", "3"} {
		if err := publish(t, r, replayOf(jobs[id], 7, int64(100+i))); err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
	}
	ctx := t.Context()
	if n := q.Client.ZCard(ctx, q.Key("failed")).Val(); n != 0 {
		t.Errorf("%d jobs still failed", n)
	}
	// Workers take from the right: FIFO jobs go left, LIFO right.
	if got := q.Client.LRange(ctx, q.Key("wait"), 0, -1).Val(); strings.Join(got, ",") != "1,w1,2" {
		t.Errorf("wait = %v, want [1 w1 2]", got)
	}
	if s, err := q.Client.ZScore(ctx, q.Key("prioritized"), "3").Result(); err != nil || int64(s)>>32 != 5 {
		t.Errorf("prioritized score of 3 = %v, %v, want priority 5 in the high bits", s, err)
	}
	if q.Client.Get(ctx, q.Key("pc")).Val() != "1" {
		t.Errorf("the priority counter is %q, want 1", q.Client.Get(ctx, q.Key("pc")).Val())
	}
	if q.Client.ZScore(ctx, q.Key("marker"), "0").Err() != nil {
		t.Error("no marker for a worker to wake on")
	}
	for _, id := range []string{"1", "2", "3"} {
		h := q.Hash(t, id)
		for _, gone := range []string{"finishedOn", "processedOn", "failedReason"} {
			if _, ok := h[gone]; ok {
				t.Errorf("job %s keeps %s", id, gone)
			}
		}
		if h["atm"] != "2" || h["stacktrace"] == "" {
			t.Errorf("job %s: atm %q, stacktrace %q: attempts and traces stay, as Job.retry() leaves them", id, h["atm"], h["stacktrace"])
		}
		if !strings.Contains(h[bullmq.MarkField], `"x-replay-request":7`) {
			t.Errorf("job %s marks %q", id, h[bullmq.MarkField])
		}
	}
	events := q.Client.XRange(ctx, q.Key("events"), "-", "+").Val()
	if len(events) != 3 || events[0].Values["event"] != "waiting" || events[0].Values["prev"] != "failed" || events[0].Values["jobId"] != "1" {
		t.Errorf("events %v", events)
	}
	if d, exists, err := r.QueueDepth(ctx, q.Ref.Name()); d != 4 || !exists || err != nil {
		t.Errorf("QueueDepth = %d, %v, %v, want 4 (wait 3, prioritized 1)", d, exists, err)
	}
}

// TestRetrierIntoAPausedQueue: a paused queue's job goes where the
// release its meta names keeps a paused queue's jobs, BullMQ 5's paused
// list or 6's wait, with no marker, as BullMQ does it; the release is
// read as the job is retried, so a queue upgraded since its capture gets
// the new release's.
func TestRetrierIntoAPausedQueue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ version, list, where string }{
		{"bullmq:5.0.0", "paused", "paused"}, {bullmq.TestedVersion5, "paused", "paused"},
		{"bullmq:6.0.0", "wait", "wait"}, {bullmq.TestedVersion6, "wait", "wait"},
	} {
		t.Run(c.version, func(t *testing.T) {
			t.Parallel()
			q := bullmqtest.NewQueue(t)
			seed(t, q, bullmq.TestedVersion5, failedJob{ID: "1"})
			jobs := captured(t, q, 1)
			q.Client.HSet(t.Context(), q.Key("meta"), "paused", "1", "version", c.version)
			if err := publish(t, newRetrier(t, q), replayOf(jobs["1"], 7, 1)); err != nil {
				t.Fatal(err)
			}
			if got := q.Client.LRange(t.Context(), q.Key(c.list), 0, -1).Val(); len(got) != 1 || got[0] != "1" {
				t.Errorf("%s = %v, want the job", c.list, got)
			}
			other := map[string]string{"paused": "wait", "wait": "paused"}[c.list]
			if q.Client.Exists(t.Context(), q.Key("marker"), q.Key(other)).Val() != 0 {
				t.Errorf("a marker or %s list for a paused queue", other)
			}
		})
	}
}

// TestRetrierResumedRunRetriesOnce: publishing the same item again (a
// run resumed after losing the answer) confirms without moving the job
// again, though it is no longer failed; another request is refused.
func TestRetrierResumedRunRetriesOnce(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1"})
	jobs := captured(t, q, 1)
	r := newRetrier(t, q)
	m := replayOf(jobs["1"], 7, 1)
	for range 3 {
		if err := publish(t, r, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.Client.LRange(t.Context(), q.Key("wait"), 0, -1).Val(); len(got) != 1 {
		t.Errorf("wait = %v, want the job once", got)
	}
	if n := q.Client.XLen(t.Context(), q.Key("events")).Val(); n != 1 {
		t.Errorf("%d events, want one waiting", n)
	}
	var moved *replay.JobMovedOnError
	if err := publish(t, r, replayOf(jobs["1"], 8, 2)); !errors.As(err, &moved) || moved.Now != "waiting" {
		t.Errorf("another request's publish: %v, want moved on (waiting)", err)
	}
}

// TestRetrierJobMovedOn: a job removed, retried by someone else, or
// failed again since its capture is skipped with what it is now.
func TestRetrierJobMovedOn(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", FinishedOn: 1000}, failedJob{ID: "2", FinishedOn: 2000}, failedJob{ID: "3", FinishedOn: 3000},
		failedJob{ID: "4", FinishedOn: 4000})
	jobs := captured(t, q, 4)
	ctx := t.Context()
	q.Client.Del(ctx, q.Key("1"))
	q.Client.ZRem(ctx, q.Key("failed"), "1")
	// 2 retried and now running.
	q.Client.ZRem(ctx, q.Key("failed"), "2")
	q.Client.LPush(ctx, q.Key("active"), "2")
	// 3 retried and failed again.
	seed(t, q, "", failedJob{ID: "3", FinishedOn: 3500, Attempts: 3})
	// 4 retried and completed.
	q.Client.ZRem(ctx, q.Key("failed"), "4")
	q.Client.ZAdd(ctx, q.Key("completed"), redis.Z{Score: 4100, Member: "4"})
	before := q.Digest(t)

	r := newRetrier(t, q)
	for id, want := range map[string]string{"1": "deleted", "2": "active", "3": "failed again at finishedOn 3500 after 3 attempts", "4": "completed"} {
		var moved *replay.JobMovedOnError
		err := publish(t, r, replayOf(jobs[id], 7, 1))
		if !errors.As(err, &moved) || moved.Now != want || moved.JobID != id {
			t.Errorf("job %s: %v, want moved on (%s)", id, err, want)
		}
	}
	if q.Digest(t) != before {
		t.Error("a refused retry changed Redis")
	}
}

// TestRetrierRefusals: a queue of a BullMQ whose layout the driver does
// not know (4 and older, a later major, Pro, or a meta without a
// version) fails the item with the reason, naming the versions it does
// know, and is not written; so does a message that is not BullMQ's.
func TestRetrierRefusals(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1"})
	jobs := captured(t, q, 1)
	r := newRetrier(t, q)
	var failure *replay.PublishFailure
	for _, v := range []string{"bullmq:4.17.0", "bullmq:7.0.0", "bullmq-pro:7.21.0", "bullmq:5", ""} {
		if v == "" {
			q.Client.HDel(t.Context(), q.Key("meta"), "version")
		} else {
			q.Client.HSet(t.Context(), q.Key("meta"), "version", v)
		}
		before := q.Digest(t)
		err := publish(t, r, replayOf(jobs["1"], 7, 1))
		if !errors.As(err, &failure) || !strings.Contains(failure.Reason, v) ||
			!strings.Contains(failure.Reason, "BullMQ 5 and 6") || !strings.Contains(failure.Reason, bullmq.SupportedVersion) {
			t.Errorf("version %q: %v, want the item failed naming the version and those supported", v, err)
		}
		if q.Digest(t) != before {
			t.Errorf("a queue of version %q was written", v)
		}
	}
	m := replayOf(jobs["1"], 7, 1)
	m.System = deadletter.SQS
	if err := publish(t, r, m); !errors.As(err, &failure) {
		t.Errorf("an SQS message: %v", err)
	}
	m = replayOf(jobs["1"], 7, 1)
	m.Job.Incarnation = ""
	if err := publish(t, r, m); !errors.As(err, &failure) {
		t.Errorf("no incarnation: %v", err)
	}
	nobody := q.Ref
	nobody.Prefix, nobody.Queue = "none", strconv.Itoa(int(time.Now().UnixNano()))
	if _, exists, err := r.QueueDepth(t.Context(), nobody.Name()); exists || err != nil {
		t.Errorf("a queue nobody opened: exists %v, %v", exists, err)
	}
}

// TestRetrierLostRedis: a Redis that does not answer leaves the item
// unknown (BrokerLostError), for a resumed run to settle by the marks.
func TestRetrierLostRedis(t *testing.T) {
	t.Parallel()
	server := startOwnRedis(t)
	q := bullmqtest.NewQueueOn(t, server.addr())
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1"})
	jobs := captured(t, q, 1)
	r := newRetrier(t, q)
	server.stop()
	var lost *replay.BrokerLostError
	if err := publish(t, r, replayOf(jobs["1"], 7, 1)); !errors.As(err, &lost) {
		t.Errorf("Redis down: %v, want *replay.BrokerLostError", err)
	}
	server.start()
	if err := publish(t, r, replayOf(jobs["1"], 7, 1)); err != nil {
		t.Errorf("Redis back: %v", err)
	}
}
