package pgboss_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
	"github.com/expiryctl/expiryctl/replay"
)

// replayOf is the message the runner makes of a captured job for item
// of request.
func replayOf(d deadletter.Delivery, request, item int64) replay.Message {
	return replay.Message{
		Item: item, RoutingKey: d.Message.Queue, System: pgboss.System, Body: d.Message.Body,
		Headers: map[string]any{
			replay.HeaderReplayRequest: request, replay.HeaderReplayCount: int64(1), replay.HeaderReplayItem: item,
			replay.HeaderReplayedBy: "carol", replay.HeaderApprovedBy: "dave",
			replay.HeaderReplayedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		},
		Job: replay.JobRef{ID: d.Message.MessageID, Incarnation: d.Message.Native[deadletter.NativeIncarnation]},
	}
}

// publish publishes m and waits for its outcome.
func publish(tb testing.TB, b replay.Broker, m replay.Message) error {
	tb.Helper()
	p, err := b.Publish(context.Background(), m)
	if err != nil {
		tb.Fatalf("Publish: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(wait):
		tb.Fatal("the publish did not settle")
	}
	return p.Outcome()
}

// TestAReplayedJobRunsAgainInPgBossAndCompletes is the replay end to end
// on a real pg-boss: its worker fails a job for good, capture reads it,
// the retrier retries it, and pg-boss's worker takes the job again, as
// the same job, and completes it. A second publish of the same item, as a
// resumed run makes, confirms without writing the job again.
func TestAReplayedJobRunsAgainInPgBossAndCompletes(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 1, "retryDelay": 0})
	b.Work()
	id := b.SendJobs(nil, reservations(1, 1)...)[0]
	b.WaitState(id, "failed")
	ref := db.Ref(t, "expiry")
	d := capture(t, ref, 1)[0]

	b.Succeed()
	r := openRetrier(t, ref)
	m := replayOf(d, 42, 7)
	if err := publish(t, r, m); err != nil {
		t.Fatalf("publish: %v", err)
	}
	done := b.Await("completed", id)
	if done.RetryCount != 2 || string(done.Data) != `{"reservation_id":"r-1","idempotency_key":"expire:r-1:v1"}` {
		t.Errorf("pg-boss's worker ran retry %d of the job with data %s; want its third attempt of the same data", done.RetryCount, done.Data)
	}
	after := b.WaitState(id, "completed")
	for _, want := range []string{`"x-replay-request": 42`, `"x-replay-item": 7`, `"x-replayed-by": "carol"`, `"x-approved-by": "dave"`,
		`"x-replayed-at": "2026-12-01T09:00:00Z"`, `"x-replay-count": 1`} {
		if !strings.Contains(after.Marks, want) {
			t.Errorf("marks %s lack %s", after.Marks, want)
		}
	}
	if got := len(b.Seen("failing")); got != 2 {
		t.Errorf("the worker failed the job %d times; want the 2 before the replay", got)
	}

	if err := publish(t, r, m); err != nil {
		t.Errorf("publish again: %v", err)
	}
	if again := db.Job(t, "expiry", id); again.XMin != after.XMin {
		t.Errorf("the second publish of the same item wrote the job again (xmin %d, then %d)", after.XMin, again.XMin)
	}
	var moved *replay.JobMovedOnError
	if err := publish(t, r, replayOf(d, 43, 8)); !errors.As(err, &moved) || moved.Now != "state completed" {
		t.Errorf("another request's publish: %v; want the job moved on (state completed)", err)
	}
}

// TestAReplayedJobThatFailsAgainLinksToTheReplay: the marks a replay wrote
// survive pg-boss's next failure of the job, so that its new letter (a new
// incarnation) names the request that retried it.
func TestAReplayedJobThatFailsAgainLinksToTheReplay(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 0})
	b.Work()
	id := b.SendJobs(nil, reservations(1, 1)...)[0]
	b.WaitState(id, "failed")
	ref := db.Ref(t, "expiry")
	src := openSource(t, ref, pgboss.SourceOptions{})
	first := receive(t, src, 1)[0]

	b.Succeed("r-1")
	if err := publish(t, openRetrier(t, ref), replayOf(first, 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	again := receive(t, src, 1)[0].Message
	if again.MessageID != id || again.Native[deadletter.NativeIncarnation] == first.Message.Native[deadletter.NativeIncarnation] {
		t.Fatalf("after the retry failed, got job %s incarnation %s", again.MessageID, again.Native[deadletter.NativeIncarnation])
	}
	l := deadletter.Parse(again, nil, time.Now())
	if l.ReplayRequestID == nil || *l.ReplayRequestID != 42 || l.Attempts != 2 {
		t.Errorf("the second letter: replay request %v, %d attempts; want request 42, 2 attempts", l.ReplayRequestID, l.Attempts)
	}
	if l.Fingerprint == deadletter.Parse(first.Message, nil, time.Now()).Fingerprint {
		t.Error("the second failure has the first's fingerprint")
	}
}

// TestRetrierRetriesAsPgBossRetryDoes: the retry writes what pg-boss's own
// retry(name, id) writes, on a twin job it retried, besides the marks;
// trace_context's own keys stay.
func TestRetrierRetriesAsPgBossRetryDoes(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	ids := b.FailJobs(reservations(1, 2)...)
	db.Exec(t, `UPDATE {job} SET trace_context = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}' WHERE name = 'expiry'`)
	ref := db.Ref(t, "expiry")
	got := capture(t, ref, 2)
	b.Retry(ids[0])
	theirs := db.Job(t, "expiry", ids[0])
	if err := publish(t, openRetrier(t, ref), replayOf(got[1], 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	ours := db.Job(t, "expiry", ids[1])
	if ours.State != theirs.State || ours.RetryLimit != theirs.RetryLimit || ours.RetryCount != theirs.RetryCount ||
		ours.CompletedOn != nil || theirs.CompletedOn != nil || ours.Trace != theirs.Trace {
		t.Errorf("expiryctl's retry left %+v, pg-boss's %+v", ours, theirs)
	}
	if ours.State != "retry" || ours.RetryLimit != 1 || !strings.Contains(ours.Trace, "traceparent") || !strings.Contains(ours.Marks, `"x-replay-request": 42`) {
		t.Errorf("after the retry: %+v; want retry, one more try, trace context kept, marks added", ours)
	}
	if n, _, err := openRetrier(t, ref).QueueDepth(context.Background(), ref.Name()); err != nil || n != 2 {
		t.Errorf("QueueDepth = %d, %v; want both retried jobs ready", n, err)
	}
}

// TestRetrierKeepsAJobPastItsRetentionAlive: pg-boss's maintenance deletes
// a waiting job whose keep_until has passed, so a retry moves keep_until
// as far as it moves start_after.
func TestRetrierKeepsAJobPastItsRetentionAlive(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	id := b.FailJobs(reservations(1, 1)...)[0]
	db.Exec(t, `UPDATE {job} SET start_after = now() - interval '20 days', keep_until = now() - interval '6 days' WHERE name = 'expiry'`)
	ref := db.Ref(t, "expiry")
	if err := publish(t, openRetrier(t, ref), replayOf(capture(t, ref, 1)[0], 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	s := db.Job(t, "expiry", id)
	if window := s.KeepUntil.Sub(s.StartAfter); window < 14*24*time.Hour-time.Second || window > 14*24*time.Hour+time.Second {
		t.Errorf("keep_until is %s after start_after, want the job's 14 days of retention again", window)
	}
	if !s.KeepUntil.After(time.Now()) {
		t.Errorf("keep_until %s has passed: pg-boss would delete the retried job", s.KeepUntil)
	}
}

// TestRetrierOnAConfiguredConnection: a source and a retrier on a
// connection of the configuration name the queue by the connection, and
// the retrier retries what the source captured.
func TestRetrierOnAConfiguredConnection(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	id := b.FailJobs(reservations(1, 1)...)[0]
	ref, err := pgboss.RefFor(config.Connection{Name: "orders", System: pgboss.System, URLs: []string{db.URL}}, "", "expiry")
	if err != nil {
		t.Fatal(err)
	}
	d := capture(t, ref, 1)[0]
	if d.Message.Queue != "pgboss://orders/expiry" {
		t.Errorf("the letter's queue is %s, want pgboss://orders/expiry", d.Message.Queue)
	}
	if err := publish(t, openRetrier(t, ref), replayOf(d, 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if s := db.Job(t, "expiry", id); s.State != "retry" {
		t.Errorf("after the retry the job is %s, want retry", s.State)
	}
}

func TestRetrierSkipsAJobThatMovedOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(t *testing.T, db *pgbosstest.DB, b *pgbosstest.Boss, id string)
		now    string
	}{
		{"deleted", func(t *testing.T, _ *pgbosstest.DB, b *pgbosstest.Boss, id string) { b.DeleteJob(id) }, "deleted"},
		{"retried by pg-boss", func(t *testing.T, _ *pgbosstest.DB, b *pgbosstest.Boss, id string) { b.Retry(id) }, "state retry"},
		{"running again", func(t *testing.T, _ *pgbosstest.DB, b *pgbosstest.Boss, id string) {
			b.Retry(id)
			b.Fetch(1)
		}, "state active"},
		{"failed again", func(t *testing.T, _ *pgbosstest.DB, b *pgbosstest.Boss, id string) {
			b.Retry(id)
			b.FailNext(id)
		}, "it failed again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, b := pgbosstest.New(t, "expiry", nil)
			b.FailJobs(reservations(1, 1)...)
			ref := db.Ref(t, "expiry")
			d := capture(t, ref, 1)[0]
			r := openRetrier(t, ref)
			tt.change(t, db, b, d.Message.MessageID)
			before := db.TableDigest(t)
			err := publish(t, r, replayOf(d, 42, 7))
			var moved *replay.JobMovedOnError
			if !errors.As(err, &moved) || !strings.Contains(moved.Now, tt.now) || moved.JobID != d.Message.MessageID {
				t.Fatalf("publish: %v; want the job moved on (%s)", err, tt.now)
			}
			if after := db.TableDigest(t); after != before {
				t.Error("a publish that skipped the job changed pg-boss's tables")
			}
		})
	}
}

// TestRetrierRefusesARetryPgBossWouldNotTake: in a stately queue pg-boss
// keeps one waiting job per singleton key and state; a failed job whose
// key another job now holds in state retry cannot be put back, and its
// item fails without a change.
func TestRetrierRefusesARetryPgBossWouldNotTake(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 0, "policy": "stately"})
	first := b.FailJobsWith(map[string]any{"singletonKey": "r-1"}, reservations(1, 1)...)[0]
	b.FailJobsWith(map[string]any{"singletonKey": "r-1", "retryLimit": 1}, reservations(1, 1)...)
	ref := db.Ref(t, "expiry")
	d := capture(t, ref, 1)[0]
	if d.Message.MessageID != first {
		t.Fatalf("captured %s, want %s", d.Message.MessageID, first)
	}
	before := db.TableDigest(t)
	var failure *replay.PublishFailure
	if err := publish(t, openRetrier(t, ref), replayOf(d, 42, 7)); !errors.As(err, &failure) || !strings.Contains(failure.Reason, "singleton key") {
		t.Errorf("publish: %v; want a publish failure naming the singleton key", err)
	}
	if after := db.TableDigest(t); after != before {
		t.Error("a refused retry changed pg-boss's tables")
	}
}

// TestRetrierRefusesWhatIsNotItsDatabasesJob: a retrier reaches one
// connection's database; a letter of another connection's queue, or one
// named by a server rather than a connection, fails its item without
// touching any job.
func TestRetrierRefusesWhatIsNotItsDatabasesJob(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	id := b.FailJobs(reservations(1, 1)...)[0]
	ref := db.Ref(t, "expiry")
	d := capture(t, ref, 1)[0]
	r := openRetrier(t, ref)
	elsewhere := replayOf(d, 42, 7)
	elsewhere.RoutingKey = "pgboss://elsewhere/expiry"
	byServer := replayOf(d, 42, 7)
	byServer.RoutingKey = "pgboss://" + ref.Server() + "/expiry"
	notPgBoss := replayOf(d, 42, 7)
	notPgBoss.System = deadletter.System("river")
	noJob := replayOf(d, 42, 7)
	noJob.Job.ID = "r-1"
	for name, tt := range map[string]struct {
		m    replay.Message
		says string
	}{
		"another connection": {elsewhere, `queue pgboss://elsewhere/expiry is of connection "elsewhere", and this replay reaches connection "` + ref.Conn + `"`},
		"a server's name":    {byServer, "a queue's name never says which server to dial"},
		"not pg-boss":        {notPgBoss, "not a pg-boss job"},
		"no job id":          {noJob, "names no pg-boss job"},
	} {
		var failure *replay.PublishFailure
		if err := publish(t, r, tt.m); !errors.As(err, &failure) || !strings.Contains(failure.Reason, tt.says) {
			t.Errorf("%s: %v; want a publish failure saying %q", name, err, tt.says)
		}
	}
	if _, _, err := r.QueueDepth(context.Background(), elsewhere.RoutingKey); err == nil || !strings.Contains(err.Error(), `connection "elsewhere"`) {
		t.Errorf("QueueDepth of another connection's queue: %v; want it refused", err)
	}
	if s := db.Job(t, "expiry", id); s.State != "failed" {
		t.Errorf("the job is %s after refused publishes", s.State)
	}
}

// TestRetrierQueueDepth counts the jobs a worker's fetch would take now:
// created and retry jobs whose start_after has come.
func TestRetrierQueueDepth(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.CreateQueue("idle", nil)
	b.FailJobs(reservations(1, 1)...)                                      // failed
	b.FailJobsWith(map[string]any{"retryLimit": 1}, reservations(2, 1)...) // retry, due
	b.SendJobs(nil, reservations(3, 2)...)                                 // created, due
	b.SendJobs(map[string]any{"startAfter": 3600}, reservations(5, 1)...)  // created, deferred
	b.Fetch(1)                                                             // one of the due ones, now active
	r := openRetrier(t, db.Ref(t, "expiry"))
	for queue, want := range map[string]struct {
		depth  int
		exists bool
	}{"expiry": {2, true}, "idle": {0, true}, "missing": {0, false}} {
		depth, exists, err := r.QueueDepth(context.Background(), db.Ref(t, queue).Name())
		if err != nil || depth != want.depth || exists != want.exists {
			t.Errorf("QueueDepth(%s) = %d, %v, %v; want %d, %v", queue, depth, exists, err, want.depth, want.exists)
		}
	}
}
