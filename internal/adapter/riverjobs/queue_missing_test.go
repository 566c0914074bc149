package riverjobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

// wantMissing fails t unless err is a *QueueMissingError of queue on ref's
// connection, and returns it.
func wantMissing(t *testing.T, err error, ref riverjobs.Ref) *riverjobs.QueueMissingError {
	t.Helper()
	var missing *riverjobs.QueueMissingError
	if !errors.As(err, &missing) {
		t.Fatalf("got %v; want a *QueueMissingError", err)
	}
	if !riverjobs.IsQueueMissing(fmt.Errorf("wrapped: %w", err)) {
		t.Error("IsQueueMissing does not see it through a wrap")
	}
	if missing.Queue != ref.Queue || missing.Conn != ref.Conn || missing.Server != ref.Server() {
		t.Errorf("names queue %q on %q (%s); want %q on %q (%s)", missing.Queue, missing.Conn, missing.Server, ref.Queue, ref.Conn, ref.Server())
	}
	for _, part := range []string{`"` + ref.Queue + `"`, `"` + ref.Conn + `"`, ref.Server()} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %s: %v", part, err)
		}
	}
	return missing
}

// TestOpeningAQueueRiverDoesNotKnowIsRefused: a misspelt queue is refused
// by the source, the retrier and the topology alike, naming the queue,
// the connection and the queues River knows there, nearest first, with a
// suggestion; a queue River knows by a river_queue row alone, or by jobs
// in any state, completed ones included, opens. Nothing is written.
func TestOpeningAQueueRiverDoesNotKnowIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newRiverDB(t)
	db.seed(t, failedJob{Queue: "expiry"})
	db.seed(t, failedJob{Queue: "mail"})
	exec(t, db, `INSERT INTO river_job (state, max_attempts, args, kind, queue, finalized_at)
		VALUES ('completed', 5, '{}', 'k', 'done_only', now())`)
	db.worked(t, "idle")
	before := db.tableDigest(t)

	typo := db.ref(t, "expirey")
	_, err := riverjobs.OpenSource(ctx, typo, riverjobs.SourceOptions{})
	missing := wantMissing(t, err, typo)
	if missing.Nearest != "expiry" || !strings.Contains(err.Error(), `(did you mean "expiry"?)`) {
		t.Errorf("suggests %q: %v; want expiry", missing.Nearest, err)
	}
	if want := []string{"expiry", "idle", "mail", "done_only"}; !slices.Equal(missing.Known, want) || missing.More != 0 {
		t.Errorf("known %v (+%d); want %v, nearest first", missing.Known, missing.More, want)
	}
	if missing.QueueTableUnread {
		t.Error("a superuser's login was said not to read river_queue")
	}
	t.Log(err)

	_, err = riverjobs.OpenRetrier(ctx, typo, riverjobs.RetrierOptions{})
	_ = wantMissing(t, err, typo)

	report, err := riverjobs.Topology(ctx, typo)
	_ = wantMissing(t, err, typo)
	if report.Unavailable != err.Error() || len(report.Queues) != 0 {
		t.Errorf("Topology's report %+v; want no queues and the error's text as Unavailable", report)
	}

	for _, known := range []string{"expiry", "idle", "done_only"} {
		src := openSource(t, db.ref(t, known), riverjobs.SourceOptions{})
		_ = src.Close()
		if _, err := riverjobs.Topology(ctx, db.ref(t, known)); err != nil {
			t.Errorf("Topology of %s: %v", known, err)
		}
	}
	if after := db.tableDigest(t); after != before {
		t.Error("looking for the queue changed River's tables")
	}
}

// TestRetrierChecksEveryTargetQueue: a run's other targets on the same
// connection are checked with CheckQueue; a queue of another connection
// is refused as such, not reported missing.
func TestRetrierChecksEveryTargetQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newRiverDB(t)
	db.seed(t, failedJob{Queue: "expiry"})
	db.worked(t, "mail")
	r := openRetrier(t, db.ref(t, "expiry"))
	if err := r.CheckQueue(ctx, db.ref(t, "mail").Name()); err != nil {
		t.Errorf("CheckQueue of a worked queue: %v", err)
	}
	_ = wantMissing(t, r.CheckQueue(ctx, db.ref(t, "male").Name()), db.ref(t, "male"))
	err := r.CheckQueue(ctx, "river://elsewhere/expiry")
	if err == nil || riverjobs.IsQueueMissing(err) || !strings.Contains(err.Error(), `connection "elsewhere"`) {
		t.Errorf("CheckQueue of another connection's queue: %v; want it refused as another connection's", err)
	}
}

// TestQueueMissingListsFiveQueuesNearestFirst: of many queues, five are
// named, nearest first, and the rest counted; a name like none of them
// gets no suggestion.
func TestQueueMissingListsFiveQueuesNearestFirst(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	for _, q := range []string{"expiry_a", "expiry_b", "expiry_c", "mail", "sms", "push", "billing", "exports"} {
		db.seed(t, failedJob{Queue: q})
	}
	ref := db.ref(t, "expiry")
	_, err := riverjobs.OpenSource(context.Background(), ref, riverjobs.SourceOptions{})
	missing := wantMissing(t, err, ref)
	if want := []string{"expiry_a", "expiry_b", "expiry_c", "exports", "mail"}; !slices.Equal(missing.Known, want) || missing.More != 3 {
		t.Errorf("known %v and %d more; want %v and 3 more", missing.Known, missing.More, want)
	}
	if missing.Nearest != "expiry_a" || !strings.Contains(err.Error(), "and 3 more") {
		t.Errorf("nearest %q: %v", missing.Nearest, err)
	}

	far := db.ref(t, "zzzzzzzzzz")
	_, err = riverjobs.OpenSource(context.Background(), far, riverjobs.SourceOptions{})
	if m := wantMissing(t, err, far); m.Nearest != "" || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name like no queue got a suggestion: %v", err)
	}

	empty := newRiverDB(t)
	_, err = riverjobs.OpenSource(context.Background(), empty.ref(t, "expiry"), riverjobs.SourceOptions{})
	if m := wantMissing(t, err, empty.ref(t, "expiry")); len(m.Known) != 0 || !strings.Contains(err.Error(), "River knows no queue there") {
		t.Errorf("in a River database with no queue: %v", err)
	}
}

// TestACaptureLoginThatCannotReadRiverQueue: docs/river.md's capture
// login reads river_job alone. It opens a queue that holds jobs; a queue
// known by its river_queue row alone looks missing to it, and the error
// says why and which grant shows it.
func TestACaptureLoginThatCannotReadRiverQueue(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	capturer := db.PG.Login(t, "river_capture")
	t.Cleanup(func() { exec(t, db, "REVOKE ALL ON river_job FROM "+pgx.Identifier{capturer.Name}.Sanitize()) })
	exec(t, db, "GRANT SELECT ON river_job TO "+pgx.Identifier{capturer.Name}.Sanitize())
	db.seed(t, failedJob{Queue: "expiry", FinalizedAt: time.Now().Add(-time.Minute)})
	db.worked(t, "idle")

	capture(t, refFor(t, capturer.URL, "expiry"), 1)
	idle := refFor(t, capturer.URL, "idle")
	_, err := riverjobs.OpenSource(context.Background(), idle, riverjobs.SourceOptions{})
	missing := wantMissing(t, err, idle)
	if !missing.QueueTableUnread || !slices.Equal(missing.Known, []string{"expiry"}) || !strings.Contains(err.Error(), "GRANT SELECT ON river_queue") {
		t.Errorf("unread %v, known %v: %v; want river_queue unread, only the queue with jobs known, and the grant named",
			missing.QueueTableUnread, missing.Known, err)
	}
}
