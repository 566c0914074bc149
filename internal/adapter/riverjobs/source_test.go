package riverjobs_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

func TestSourceCapturesADiscardedJobWhole(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	at := time.Date(2026, 11, 30, 12, 20, 0, 123456000, time.UTC)
	id := db.seed(t, failedJob{
		Args: `{"reservation_id":"r-8421","expected_version":3,"idempotency_key":"expire:r-8421:v3"}`,
		Errors: []map[string]any{
			{"at": "2026-11-30T12:19:58Z", "attempt": 1, "error": "db_timeout: context deadline exceeded", "trace": ""},
			{"at": "2026-11-30T12:19:59.5Z", "attempt": 2, "error": "panic: nil map", "trace": "goroutine 7 [running]:\nmain.work()"},
		},
		Attempt: 2, Max: 2, FinalizedAt: at, Tags: []string{"expiry", "eu"},
		Metadata:  `{"expiryctl":{"x-replay-request":42,"x-replay-count":1,"x-replay-item":7,"x-replayed-by":"alice"},"trace_id":"abc"}`,
		UniqueKey: []byte{0xde, 0xad},
	})
	db.seed(t, failedJob{Queue: "other"})
	db.seed(t, failedJob{State: "cancelled"})
	ref := db.ref(t, "expiry")
	src := openSource(t, ref, riverjobs.SourceOptions{})
	d := receive(t, src, 1)[0]
	quiet(t, src, 300*time.Millisecond)

	m := d.Message
	var argsText string
	if err := db.Pool.QueryRow(context.Background(), "SELECT args::text FROM river_job WHERE id = $1", id).Scan(&argsText); err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != argsText {
		t.Errorf("body %q, want args as PostgreSQL holds them %q", m.Body, argsText)
	}
	if m.System != riverjobs.System || m.Queue != ref.Name() || m.MessageID != strconv.FormatInt(id, 10) || m.Type != "reservation_expiry" {
		t.Errorf("system %s queue %s id %s type %s", m.System, m.Queue, m.MessageID, m.Type)
	}
	if !m.Timestamp.Equal(at) || m.Native[deadletter.NativeIncarnation] != "2026-11-30T12:20:00.123456Z" {
		t.Errorf("timestamp %s incarnation %s", m.Timestamp, m.Native[deadletter.NativeIncarnation])
	}
	want := map[string]string{"state": "discarded", "queue": "expiry", "priority": "1", "tags": `["expiry","eu"]`,
		"attempted_by": `["host-1"]`, "unique_key": hex.EncodeToString([]byte{0xde, 0xad}), deadletter.NativeMaxAttempts: "2",
		deadletter.NativeKind: "reservation_expiry"}
	for k, v := range want {
		if m.Native[k] != v {
			t.Errorf("native %s = %q, want %q", k, m.Native[k], v)
		}
	}
	for _, k := range []string{"created_at", "scheduled_at", "attempted_at", "metadata"} {
		if m.Native[k] == "" {
			t.Errorf("native %s is missing", k)
		}
	}
	if m.Headers["x-replay-request"] != int64(42) || m.Headers["x-replayed-by"] != "alice" {
		t.Errorf("replay marks did not come back as headers: %v", m.Headers)
	}
	if m.Headers["x-last-error"] != "panic: nil map" || m.Headers["x-attempt"] != int64(2) {
		t.Errorf("last error %v attempt %v", m.Headers["x-last-error"], m.Headers["x-attempt"])
	}
	l := deadletter.Parse(m, deadletter.DefaultClassifier(), time.Now())
	if l.ReplayRequestID == nil || *l.ReplayRequestID != 42 || len(l.AttemptHistory) != 2 || l.AttemptHistory[1].Trace == "" || l.AttemptHistory[1].Attempt != 2 {
		t.Errorf("parsed letter: replay %v history %+v", l.ReplayRequestID, l.AttemptHistory)
	}
}

func TestSourceCapturesCancelledJobsWhenAsked(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	base := time.Now().Add(-time.Minute)
	discarded := db.seed(t, failedJob{FinalizedAt: base})
	cancelled := db.seed(t, failedJob{State: "cancelled", FinalizedAt: base.Add(time.Second)})
	db.seed(t, failedJob{State: "completed", FinalizedAt: base.Add(2 * time.Second)})
	src := openSource(t, db.ref(t, "expiry", "states=discarded,cancelled"), riverjobs.SourceOptions{})
	got := receive(t, src, 2)
	quiet(t, src, 300*time.Millisecond)
	if got[0].Message.MessageID != fmt.Sprint(discarded) || got[1].Message.MessageID != fmt.Sprint(cancelled) {
		t.Errorf("got jobs %s, %s; want %d then %d in finalized_at order", got[0].Message.MessageID, got[1].Message.MessageID, discarded, cancelled)
	}
	if got[1].Message.Native["state"] != "cancelled" {
		t.Errorf("state %q", got[1].Message.Native["state"])
	}
}

func TestSourceNeverWritesRiversTables(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	for i := range 30 {
		db.seed(t, failedJob{State: []string{"discarded", "cancelled"}[i%2], Metadata: `{"expiryctl":{"x-replay-request":1}}`})
	}
	before := db.tableDigest(t)
	src := openSource(t, db.ref(t, "expiry", "states=discarded,cancelled"), riverjobs.SourceOptions{Prefetch: 10})
	for range 3 {
		got := receive(t, src, 10)
		if err := src.Acknowledge(got[9].Tag); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready = %d, %v; want 0", n, err)
	}
	_ = src.Close()
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready after Close = %d, %v; want 0", n, err)
	}
	if after := db.tableDigest(t); after != before {
		t.Errorf("river tables changed under capture: %s, then %s", before, after)
	}
}

func TestSourceDeliversArgsThatBreakTheContractAsTheyAre(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	args := []string{`[1, 2, 3]`, `"just a string"`, `null`, `42`, `{"reservationId": "r-\u00e9\u6f22", "note": "<&>\"'"}`, `{}`,
		`{"a": {"deep": [true, false, null]}, "reservation_id": 7}`}
	base := time.Now().Add(-time.Hour)
	ids := make([]int64, len(args))
	for i, a := range args {
		ids[i] = db.seed(t, failedJob{Args: a, FinalizedAt: base.Add(time.Duration(i) * time.Second)})
	}
	src := openSource(t, db.ref(t, "expiry"), riverjobs.SourceOptions{})
	got := receive(t, src, len(args))
	for i, d := range got {
		var want string
		if err := db.Pool.QueryRow(context.Background(), "SELECT args::text FROM river_job WHERE id = $1", ids[i]).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if string(d.Message.Body) != want {
			t.Errorf("job %d: body %q, want %q", ids[i], d.Message.Body, want)
		}
		l := deadletter.Parse(d.Message, deadletter.DefaultClassifier(), time.Now())
		if i < 4 && l.Category != deadletter.Malformed {
			t.Errorf("args %s: category %q, want malformed", args[i], l.Category)
		}
	}
}

func TestSourceFollowsJobsFinalizedLaterOnce(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	now := time.Now()
	first := db.seed(t, failedJob{FinalizedAt: now.Add(-time.Minute)})
	src := openSource(t, db.ref(t, "expiry"), riverjobs.SourceOptions{Lookback: 10 * time.Second})
	ack := func(ds []deadletter.Delivery) {
		t.Helper()
		if err := src.Acknowledge(ds[len(ds)-1].Tag); err != nil {
			t.Fatal(err)
		}
	}
	got := receive(t, src, 1)
	ack(got)
	if got[0].Message.MessageID != fmt.Sprint(first) {
		t.Fatalf("first delivery is job %s", got[0].Message.MessageID)
	}
	second := db.seed(t, failedJob{FinalizedAt: now})
	got = receive(t, src, 1)
	ack(got)
	if got[0].Message.MessageID != fmt.Sprint(second) {
		t.Fatalf("second delivery is job %s", got[0].Message.MessageID)
	}
	// A job whose River client committed it late: finalized before the
	// newest delivery, within the lookback.
	late := db.seed(t, failedJob{FinalizedAt: now.Add(-3 * time.Second)})
	got = receive(t, src, 1)
	ack(got)
	if got[0].Message.MessageID != fmt.Sprint(late) {
		t.Fatalf("late delivery is job %s", got[0].Message.MessageID)
	}
	// Every poll reads the window again; nothing comes twice.
	quiet(t, src, time.Second)
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready = %d, %v; want 0", n, err)
	}
}

func TestSourceDeliversAJobThatFailedAgainAsANewIncarnation(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	id := db.seed(t, failedJob{FinalizedAt: time.Now().Add(-time.Minute)})
	src := openSource(t, db.ref(t, "expiry"), riverjobs.SourceOptions{})
	first := receive(t, src, 1)[0]
	if _, err := db.Pool.Exec(context.Background(), `UPDATE river_job SET finalized_at = now(), attempt = attempt + 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	again := receive(t, src, 1)[0]
	if again.Message.MessageID != first.Message.MessageID ||
		again.Message.Native[deadletter.NativeIncarnation] == first.Message.Native[deadletter.NativeIncarnation] {
		t.Errorf("deliveries %s@%s then %s@%s: want the same job, a new incarnation", first.Message.MessageID,
			first.Message.Native[deadletter.NativeIncarnation], again.Message.MessageID, again.Message.Native[deadletter.NativeIncarnation])
	}
}

func TestOpenSourceSaysWhenTheDatabaseHasNoRiver(t *testing.T) {
	t.Parallel()
	db := newRiverDB(t)
	if _, err := db.Pool.Exec(context.Background(), "DROP TABLE river_job"); err != nil {
		t.Fatal(err)
	}
	_, err := riverjobs.OpenSource(context.Background(), db.ref(t, "expiry"), riverjobs.SourceOptions{})
	if err == nil {
		t.Fatal("OpenSource took a database without river_job")
	}
	t.Log(err)
}
