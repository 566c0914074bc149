package riverjobs_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
)

func openRetrier(t testing.TB, ref riverjobs.Ref) *riverjobs.Retrier {
	t.Helper()
	r, err := riverjobs.OpenRetrier(context.Background(), ref, riverjobs.RetrierOptions{})
	if err != nil {
		t.Fatalf("OpenRetrier: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// replayOf is the message the runner makes of a captured job for item
// of request.
func replayOf(d deadletter.Delivery, request, item int64) replay.Message {
	return replay.Message{
		Item: item, RoutingKey: d.Message.Queue, System: riverjobs.System, Body: d.Message.Body,
		Headers: map[string]any{
			replay.HeaderReplayRequest: request, replay.HeaderReplayCount: int64(1), replay.HeaderReplayItem: item,
			replay.HeaderReplayedBy: "carol", replay.HeaderApprovedBy: "dave",
			replay.HeaderReplayedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		},
		Job: replay.JobRef{ID: d.Message.MessageID, Incarnation: d.Message.Native[deadletter.NativeIncarnation]},
	}
}

// publish publishes m and waits for its outcome.
func publish(t testing.TB, b replay.Broker, m replay.Message) error {
	t.Helper()
	p, err := b.Publish(context.Background(), m)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the publish did not settle")
	}
	return p.Outcome()
}

// capture takes the n jobs the queue holds through a source of its own.
func capture(t testing.TB, ref riverjobs.Ref, n int) []deadletter.Delivery {
	t.Helper()
	src := openSource(t, ref, riverjobs.SourceOptions{})
	got := receive(t, src, n)
	_ = src.Close()
	return got
}

type jobState struct {
	State        string
	MaxAttempts  int
	FinalizedAt  *time.Time
	Marks, Other string
	XMin         uint32
}

func (db *riverDB) job(t testing.TB, id string) jobState {
	t.Helper()
	var s jobState
	err := db.Pool.QueryRow(context.Background(), `SELECT state::text, max_attempts, finalized_at,
		coalesce(metadata -> 'expiryctl', 'null')::text, coalesce(metadata -> 'trace_id', 'null')::text, xmin::text::bigint
		FROM river_job WHERE id = $1`, id).Scan(&s.State, &s.MaxAttempts, &s.FinalizedAt, &s.Marks, &s.Other, &s.XMin)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return s
}

func TestRetrierRetriesTheCapturedJobOnce(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	db.seed(t, failedJob{Attempt: 3, Max: 3, Metadata: `{"trace_id":"abc","expiryctl":{"x-replay-request":1,"x-replay-item":1}}`})
	ref := db.ref(t, "expiry")
	d := capture(t, ref, 1)[0]
	r := openRetrier(t, ref)

	m := replayOf(d, 42, 7)
	if err := publish(t, r, m); err != nil {
		t.Fatalf("publish: %v", err)
	}
	after := db.job(t, d.Message.MessageID)
	if after.State != "available" || after.FinalizedAt != nil || after.MaxAttempts != 4 {
		t.Errorf("after the retry: %+v; want available, not finalized, one more attempt", after)
	}
	for _, want := range []string{`"x-replay-request": 42`, `"x-replay-item": 7`, `"x-replayed-by": "carol"`, `"x-approved-by": "dave"`,
		`"x-replayed-at": "2026-12-01T09:00:00Z"`, `"x-replay-count": 1`} {
		if !strings.Contains(after.Marks, want) {
			t.Errorf("marks %s lack %s", after.Marks, want)
		}
	}
	if after.Other != `"abc"` {
		t.Errorf("the job's own metadata became %s", after.Other)
	}

	// A resumed run publishes the item again: confirmed, nothing written.
	if err := publish(t, r, m); err != nil {
		t.Errorf("publish again: %v", err)
	}
	if again := db.job(t, d.Message.MessageID); again.XMin != after.XMin {
		t.Errorf("the second publish of the same item wrote the job again (xmin %d, then %d)", after.XMin, again.XMin)
	}
	// Another item of another request finds the job no longer failed.
	var moved *replay.JobMovedOnError
	if err := publish(t, r, replayOf(d, 43, 8)); !errors.As(err, &moved) || moved.Now != "state available" {
		t.Errorf("another request's publish: %v; want the job moved on (state available)", err)
	}
}

// TestRetrierOnAConfiguredConnection: a source and a retrier on a
// connection of the configuration name the queue by the connection, and
// the retrier retries what the source captured.
func TestRetrierOnAConfiguredConnection(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	db.seed(t, failedJob{})
	ref, err := riverjobs.RefFor(config.Connection{Name: "orders", System: riverjobs.System, URLs: []string{db.URL}}, "", "expiry")
	if err != nil {
		t.Fatal(err)
	}
	d := capture(t, ref, 1)[0]
	if d.Message.Queue != "river://orders/expiry" {
		t.Errorf("the letter's queue is %s, want river://orders/expiry", d.Message.Queue)
	}
	if err := publish(t, openRetrier(t, ref), replayOf(d, 42, 7)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if s := db.job(t, d.Message.MessageID); s.State != "available" {
		t.Errorf("after the retry the job is %s, want available", s.State)
	}
}

func TestRetrierSkipsAJobThatMovedOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(t *testing.T, db *riverDB, id string)
		now    string
	}{
		{"deleted", func(t *testing.T, db *riverDB, id string) {
			exec(t, db, "DELETE FROM river_job WHERE id = $1", id)
		}, "deleted"},
		{"retried by someone else", func(t *testing.T, db *riverDB, id string) {
			client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.JobRetry(context.Background(), parseID(t, id)); err != nil {
				t.Fatal(err)
			}
		}, "state available"},
		{"failed again", func(t *testing.T, db *riverDB, id string) {
			exec(t, db, "UPDATE river_job SET finalized_at = finalized_at + interval '1 second' WHERE id = $1", id)
		}, "it failed again"},
		{"completed", func(t *testing.T, db *riverDB, id string) {
			exec(t, db, "UPDATE river_job SET state = 'completed' WHERE id = $1", id)
		}, "state completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newRiverDB(t)
			db.seed(t, failedJob{})
			ref := db.ref(t, "expiry")
			d := capture(t, ref, 1)[0]
			r := openRetrier(t, ref)
			tt.change(t, db, d.Message.MessageID)
			before := db.tableDigest(t)
			err := publish(t, r, replayOf(d, 42, 7))
			var moved *replay.JobMovedOnError
			if !errors.As(err, &moved) || !strings.Contains(moved.Now, tt.now) || moved.JobID != d.Message.MessageID {
				t.Fatalf("publish: %v; want the job moved on (%s)", err, tt.now)
			}
			if after := db.tableDigest(t); after != before {
				t.Error("a publish that skipped the job changed river_job")
			}
		})
	}
}

// TestRetrierRefusesWhatIsNotItsDatabasesJob: a retrier reaches one
// connection's database; a letter of another connection's queue, or one
// named by a server rather than a connection (as letters were before
// connections had names), fails its item without touching any job.
func TestRetrierRefusesWhatIsNotItsDatabasesJob(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	db.seed(t, failedJob{})
	ref := db.ref(t, "expiry")
	d := capture(t, ref, 1)[0]
	r := openRetrier(t, ref)
	elsewhere := replayOf(d, 42, 7)
	elsewhere.RoutingKey = "river://elsewhere/expiry"
	byServer := replayOf(d, 42, 7)
	byServer.RoutingKey = "river://" + ref.Server() + "/expiry"
	notRiver := replayOf(d, 42, 7)
	notRiver.System = deadletter.SQS
	noJob := replayOf(d, 42, 7)
	noJob.Job.ID = "r-1"
	for name, tt := range map[string]struct {
		m    replay.Message
		says string
	}{
		"another connection": {elsewhere, `queue river://elsewhere/expiry is of connection "elsewhere", and this replay reaches connection "` + ref.Conn + `"`},
		"a server's name":    {byServer, "a queue's name never says which server to dial"},
		"not River":          {notRiver, "not a River job"},
		"no job id":          {noJob, "names no River job"},
	} {
		var failure *replay.PublishFailure
		if err := publish(t, r, tt.m); !errors.As(err, &failure) || !strings.Contains(failure.Reason, tt.says) {
			t.Errorf("%s: %v; want a publish failure saying %q", name, err, tt.says)
		}
	}
	if _, _, err := r.QueueDepth(context.Background(), elsewhere.RoutingKey); err == nil || !strings.Contains(err.Error(), `connection "elsewhere"`) {
		t.Errorf("QueueDepth of another connection's queue: %v; want it refused", err)
	}
	if s := db.job(t, d.Message.MessageID); s.State != "discarded" {
		t.Errorf("the job is %s after refused publishes", s.State)
	}
}

func TestRetrierQueueDepth(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	exec(t, db, `INSERT INTO river_job (state, max_attempts, scheduled_at, args, kind, queue) VALUES
		('available', 5, now(), '{}', 'k', 'expiry'),
		('available', 5, now() + interval '1 hour', '{}', 'k', 'expiry'),
		('retryable', 5, now() - interval '1 second', '{}', 'k', 'expiry'),
		('retryable', 5, now() + interval '1 hour', '{}', 'k', 'expiry'),
		('scheduled', 5, now() - interval '1 second', '{}', 'k', 'expiry'),
		('running', 5, now(), '{}', 'k', 'expiry'),
		('available', 5, now(), '{}', 'k', 'other')`)
	exec(t, db, `INSERT INTO river_queue (name, updated_at) VALUES ('idle', now())`)
	r := openRetrier(t, db.ref(t, "expiry"))
	for queue, want := range map[string]struct {
		depth  int
		exists bool
	}{"expiry": {4, true}, "idle": {0, true}, "missing": {0, false}} {
		depth, exists, err := r.QueueDepth(context.Background(), db.ref(t, queue).Name())
		if err != nil || depth != want.depth || exists != want.exists {
			t.Errorf("QueueDepth(%s) = %d, %v, %v; want %d, %v", queue, depth, exists, err, want.depth, want.exists)
		}
	}
}

func exec(t testing.TB, db *riverDB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func parseID(t testing.TB, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
