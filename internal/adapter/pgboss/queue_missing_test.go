package pgboss_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// wantMissing fails t unless err is a *QueueMissingError of queue on ref's
// connection, and returns it.
func wantMissing(t *testing.T, err error, ref pgboss.Ref) *pgboss.QueueMissingError {
	t.Helper()
	var missing *pgboss.QueueMissingError
	if !errors.As(err, &missing) {
		t.Fatalf("got %v; want a *QueueMissingError", err)
	}
	if !pgboss.IsQueueMissing(fmt.Errorf("wrapped: %w", err)) || !errors.Is(err, deadletter.ErrQueueNotFound) {
		t.Error("IsQueueMissing or errors.Is(deadletter.ErrQueueNotFound) does not see it through a wrap")
	}
	if missing.Queue != ref.Queue || missing.Conn != ref.Conn || missing.Server != ref.Server() || missing.Schema != ref.Schema {
		t.Errorf("names queue %q on %q (%s, schema %s); want %q on %q (%s, schema %s)", missing.Queue, missing.Conn, missing.Server, missing.Schema,
			ref.Queue, ref.Conn, ref.Server(), ref.Schema)
	}
	for _, part := range []string{`"` + ref.Queue + `"`, `"` + ref.Conn + `"`, ref.Server()} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %s: %v", part, err)
		}
	}
	return missing
}

// TestOpeningAQueuePgBossDoesNotKnowIsRefused: a misspelt queue is
// refused by the source, the retrier and the topology alike, naming the
// queue, the connection and the queues pg-boss knows there, nearest
// first, with a suggestion; a queue pg-boss knows with no job opens.
// Nothing is written.
func TestOpeningAQueuePgBossDoesNotKnowIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.CreateQueue("mail", nil)
	b.CreateQueue("idle", nil)
	b.FailJobs(reservations(1, 1)...)
	before := db.TableDigest(t)

	typo := db.Ref(t, "expirey")
	_, err := pgboss.OpenSource(ctx, typo, pgboss.SourceOptions{})
	missing := wantMissing(t, err, typo)
	if missing.Nearest != "expiry" || !strings.Contains(err.Error(), `(did you mean "expiry"?)`) {
		t.Errorf("suggests %q: %v; want expiry", missing.Nearest, err)
	}
	if want := []string{"expiry", "idle", "mail"}; !slices.Equal(missing.Known, want) || missing.More != 0 {
		t.Errorf("known %v (+%d); want %v, nearest first", missing.Known, missing.More, want)
	}
	t.Log(err)

	_, err = pgboss.OpenRetrier(ctx, typo, pgboss.RetrierOptions{})
	_ = wantMissing(t, err, typo)

	report, err := pgboss.Topology(ctx, typo)
	_ = wantMissing(t, err, typo)
	if report.Unavailable != err.Error() || len(report.Queues) != 0 {
		t.Errorf("Topology's report %+v; want no queues and the error's text as Unavailable", report)
	}

	for _, known := range []string{"expiry", "idle"} {
		src := openSource(t, db.Ref(t, known), pgboss.SourceOptions{})
		_ = src.Close()
		if _, err := pgboss.Topology(ctx, db.Ref(t, known)); err != nil {
			t.Errorf("Topology of %s: %v", known, err)
		}
	}
	if after := db.TableDigest(t); after != before {
		t.Error("looking for the queue changed pg-boss's tables")
	}
}

// TestRetrierChecksEveryTargetQueue: a run's other targets on the same
// connection are checked with CheckQueue; a queue of another connection
// is refused as such, not reported missing.
func TestRetrierChecksEveryTargetQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.CreateQueue("mail", nil)
	r := openRetrier(t, db.Ref(t, "expiry"))
	if err := r.CheckQueue(ctx, db.Ref(t, "mail").Name()); err != nil {
		t.Errorf("CheckQueue of a created queue: %v", err)
	}
	_ = wantMissing(t, r.CheckQueue(ctx, db.Ref(t, "male").Name()), db.Ref(t, "male"))
	err := r.CheckQueue(ctx, "pgboss://elsewhere/expiry")
	if err == nil || pgboss.IsQueueMissing(err) || !strings.Contains(err.Error(), `connection "elsewhere"`) {
		t.Errorf("CheckQueue of another connection's queue: %v; want it refused as another connection's", err)
	}
}

// TestQueueMissingListsFiveQueuesNearestFirst: of many queues, five are
// named, nearest first, and the rest counted; a name like none of them
// gets no suggestion; a schema with no queue says so.
func TestQueueMissingListsFiveQueuesNearestFirst(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry_a", nil)
	for _, q := range []string{"expiry_b", "expiry_c", "mail", "sms", "push", "billing", "exports"} {
		b.CreateQueue(q, nil)
	}
	ref := db.Ref(t, "expiry")
	_, err := pgboss.OpenSource(context.Background(), ref, pgboss.SourceOptions{})
	missing := wantMissing(t, err, ref)
	if want := []string{"expiry_a", "expiry_b", "expiry_c", "exports", "mail"}; !slices.Equal(missing.Known, want) || missing.More != 3 {
		t.Errorf("known %v and %d more; want %v and 3 more", missing.Known, missing.More, want)
	}
	if missing.Nearest != "expiry_a" || !strings.Contains(err.Error(), "and 3 more") {
		t.Errorf("nearest %q: %v", missing.Nearest, err)
	}

	far := db.Ref(t, "zzzzzzzzzz")
	_, err = pgboss.OpenSource(context.Background(), far, pgboss.SourceOptions{})
	if m := wantMissing(t, err, far); m.Nearest != "" || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name like no queue got a suggestion: %v", err)
	}

	db.Exec(t, `DELETE FROM {queue}`)
	_, err = pgboss.OpenSource(context.Background(), ref, pgboss.SourceOptions{})
	if m := wantMissing(t, err, ref); len(m.Known) != 0 || !strings.Contains(err.Error(), "pg-boss knows no queue") {
		t.Errorf("in a pg-boss schema with no queue: %v", err)
	}
}
