package bullmq_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// openSource opens a source on q with short polls, closed in cleanup.
func openSource(t *testing.T, q bullmqtest.Queue, opts bullmq.SourceOptions) *bullmq.Source {
	t.Helper()
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	src, err := bullmq.OpenSource(t.Context(), q.Client, q.Ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// receive takes n deliveries from src, acknowledging each, or fails after
// 10 s.
func receive(t *testing.T, src *bullmq.Source, n int) []deadletter.Delivery {
	t.Helper()
	var got []deadletter.Delivery
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				t.Fatalf("deliveries closed after %d of %d: %v", len(got), n, src.Err())
			}
			got = append(got, d)
			if err := src.Acknowledge(d.Tag); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("received %d of %d in 10 s", len(got), n)
		}
	}
	return got
}

// quiet fails t if src delivers anything within d.
func quiet(t *testing.T, src *bullmq.Source, d time.Duration) {
	t.Helper()
	select {
	case m, ok := <-src.Deliveries():
		if ok {
			t.Fatalf("delivered job %s (incarnation %s) again or unasked", m.Message.MessageID, m.Message.Native[deadletter.NativeIncarnation])
		}
	case <-time.After(d):
	}
}

func ids(ds []deadletter.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Message.MessageID
	}
	return out
}

// TestSourceReadsFailedJobs: every failed job is delivered in BullMQ's
// order with what BullMQ keeps of it, and Redis is the same afterwards,
// key for key.
func TestSourceReadsFailedJobs(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	base := time.Now().Add(-time.Hour).UnixMilli()
	seed(t, q, bullmq.TestedVersion,
		failedJob{ID: "7", FinishedOn: base + 30, Attempts: 3, Opts: `{"attempts":3,"backoff":{"type":"fixed","delay":10}}`,
			Traces: []string{"Error: one\n at a", "Error: two\n at b", "Error: three\n at c"}, Reason: "three",
			Extra: map[string]string{"parentKey": "bull:parent:1", "expiryctl": `{"x-replay-request":41,"x-replay-item":9,"x-replayed-by":"alice"}`}},
		failedJob{ID: "3", FinishedOn: base + 10},
		failedJob{ID: "10", FinishedOn: base + 20},
		failedJob{ID: "2", FinishedOn: base + 20},
	)
	before := q.Digest(t)
	src := openSource(t, q, bullmq.SourceOptions{})
	got := receive(t, src, 4)
	if want := []string{"3", "10", "2", "7"}; fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v: by finishedOn, then as Redis orders ids of one score", ids(got), want)
	}
	quiet(t, src, 100*time.Millisecond)
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready = %d, %v after everything was delivered, want 0", n, err)
	}
	if after := q.Digest(t); after != before {
		t.Error("reading the failed jobs changed Redis")
	}

	m := got[3].Message
	if m.System != bullmq.System || m.Queue != q.Ref.Name() || m.Type != "expire" || m.ContentType != "application/json" {
		t.Errorf("message %+v", m)
	}
	if !bytes.Equal(m.Body, []byte(`{"reservation_id":"r-7"}`)) {
		t.Errorf("body %q", m.Body)
	}
	if !m.Timestamp.Equal(time.UnixMilli(base + 30)) {
		t.Errorf("timestamp %v, want finishedOn", m.Timestamp)
	}
	wantNative := map[string]string{deadletter.NativeJobID: "7", deadletter.NativeIncarnation: strconv.FormatInt(base+30, 10) + ":3",
		deadletter.NativeKind: "expire", deadletter.NativeMaxAttempts: "3", "opts": `{"attempts":3,"backoff":{"type":"fixed","delay":10}}`,
		"finishedOn": strconv.FormatInt(base+30, 10), "processedOn": strconv.FormatInt(base+25, 10), "timestamp": strconv.FormatInt(base-20, 10),
		"attemptsStarted": "3", "delay": "0", "priority": "0", "parentKey": "bull:parent:1", "name": "expire", bullmq.NativeVersion: bullmq.TestedVersion}
	for k, v := range wantNative {
		if m.Native[k] != v {
			t.Errorf("native %s = %q, want %q", k, m.Native[k], v)
		}
	}
	if m.Headers["x-attempt"] != int64(3) || m.Headers["x-last-error"] != "three" {
		t.Errorf("x-attempt %v, x-last-error %v", m.Headers["x-attempt"], m.Headers["x-last-error"])
	}
	history, _ := m.Headers["x-attempt-history"].([]any)
	if len(history) != 3 {
		t.Fatalf("history %v", m.Headers["x-attempt-history"])
	}
	for i, h := range history {
		e := h.(map[string]any)
		if e["attempt"] != int64(i+1) || e["error"] != []string{"Error: one", "Error: two", "Error: three"}[i] || e["trace"] == "" {
			t.Errorf("history[%d] = %v", i, e)
		}
	}
	if m.Headers["x-replay-request"] != int64(41) || m.Headers["x-replay-item"] != int64(9) || m.Headers["x-replayed-by"] != "alice" {
		t.Errorf("an earlier replay's marks: %v", m.Headers)
	}
	l := deadletter.Parse(m, deadletter.DefaultClassifier(), time.Now())
	if l.ReplayRequestID == nil || *l.ReplayRequestID != 41 {
		t.Errorf("the letter links to replay %v, want 41", l.ReplayRequestID)
	}
}

// TestSourceKeepsDataAsStored: data that is not JSON is delivered byte for
// byte and capture calls it malformed; it is not dropped.
func TestSourceKeepsDataAsStored(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	raw := []byte("not json \xff\x00 {")
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", Data: raw})
	got := receive(t, openSource(t, q, bullmq.SourceOptions{}), 1)
	if !bytes.Equal(got[0].Message.Body, raw) {
		t.Errorf("body %q, want %q", got[0].Message.Body, raw)
	}
	if got[0].Message.ContentType != "" {
		t.Errorf("content type %q for data that is not JSON", got[0].Message.ContentType)
	}
	if l := deadletter.Parse(got[0].Message, deadletter.DefaultClassifier(), time.Now()); l.Category != "malformed" {
		t.Errorf("category %q, want malformed", l.Category)
	}
}

// TestSourceSkipsAFailedIdWithoutItsHash: an id left in the failed set
// whose hash is gone has nothing to capture; the rest are delivered and
// Ready does not wait for it.
func TestSourceSkipsAFailedIdWithoutItsHash(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", FinishedOn: 1000}, failedJob{ID: "2", FinishedOn: 2000}, failedJob{ID: "3", FinishedOn: 3000})
	q.Client.Del(t.Context(), q.Key("2"))
	src := openSource(t, q, bullmq.SourceOptions{})
	if got := ids(receive(t, src, 2)); fmt.Sprint(got) != "[1 3]" {
		t.Errorf("delivered %v", got)
	}
	quiet(t, src, 100*time.Millisecond)
	if n, err := src.Ready(); n != 0 || err != nil {
		t.Errorf("Ready = %d, %v, want 0", n, err)
	}
}

// TestSourceRefusesUnknownVersions: a queue neither BullMQ 5 nor 6 wrote
// (4 and older, a later major, Pro, a meta without a version) is refused
// with the version it names and those the driver reads; 5 and 6 are read.
func TestSourceRefusesUnknownVersions(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"bullmq:4.17.0", "bullmq:3.0.0", "bullmq:7.0.0", "bullmq-pro:7.21.0", "bullmq:5", "bullmq:5.x", "bullmq:6.+1.0", "bull:5.0.0", ""} {
		q := bullmqtest.NewQueue(t)
		seed(t, q, v, failedJob{ID: "1"})
		if v == "" {
			q.Client.HSet(t.Context(), q.Key("meta"), "opts.maxLenEvents", "10000")
		}
		_, err := bullmq.OpenSource(t.Context(), q.Client, q.Ref, bullmq.SourceOptions{})
		var unsupported *bullmq.UnsupportedVersionError
		if !errors.As(err, &unsupported) || unsupported.Version != v {
			t.Errorf("version %q: %v, want an *UnsupportedVersionError", v, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "BullMQ 5 and 6") || !strings.Contains(msg, bullmq.TestedVersion5) || !strings.Contains(msg, bullmq.TestedVersion6) {
			t.Errorf("version %q: %q does not name the versions expiryctl reads", v, msg)
		}
		if strings.HasPrefix(v, "bullmq-pro:") && !strings.Contains(msg, "BullMQ Pro") {
			t.Errorf("version %q: %q does not say BullMQ Pro", v, msg)
		}
	}
	for _, v := range append([]string{"bullmq:5.0.0", "bullmq:6.0.0", "bullmq:6.10.0-beta.1"}, bullmq.TestedVersions...) {
		q := bullmqtest.NewQueue(t)
		seed(t, q, v)
		if _, err := bullmq.OpenSource(t.Context(), q.Client, q.Ref, bullmq.SourceOptions{}); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

// TestSourceFollowsAnUpgradeToBullMQ6: a queue upgraded from BullMQ 5 to
// 6 under a capture goes on being read (the failed set and the job hashes
// are the same in both), each letter naming the version that wrote it;
// one upgraded to a release the driver does not know ends it with the
// reason.
func TestSourceFollowsAnUpgradeToBullMQ6(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	seed(t, q, bullmq.TestedVersion5, failedJob{ID: "1", FinishedOn: time.Now().UnixMilli()})
	src := openSource(t, q, bullmq.SourceOptions{Poll: 20 * time.Millisecond})
	if got := receive(t, src, 1)[0].Message.Native[bullmq.NativeVersion]; got != bullmq.TestedVersion5 {
		t.Errorf("the first letter names version %q", got)
	}
	seed(t, q, bullmq.TestedVersion6, failedJob{ID: "2", FinishedOn: time.Now().UnixMilli() + 1})
	if got := receive(t, src, 1)[0].Message.Native[bullmq.NativeVersion]; got != bullmq.TestedVersion6 {
		t.Errorf("the letter after the upgrade names version %q", got)
	}
	q.Client.HSet(t.Context(), q.Key("meta"), "version", "bullmq:7.0.0")
	select {
	case _, ok := <-src.Deliveries():
		if ok {
			t.Fatal("delivered after the upgrade")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still reading a BullMQ 7 queue")
	}
	var unsupported *bullmq.UnsupportedVersionError
	if !errors.As(src.Err(), &unsupported) || unsupported.Version != "bullmq:7.0.0" {
		t.Errorf("Err = %v", src.Err())
	}
}

// TestSourcePrefetch: no more than Prefetch deliveries wait for their
// acknowledgement; acknowledging makes room, and changes nothing in Redis.
func TestSourcePrefetch(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	var jobs []failedJob
	for i := range 10 {
		jobs = append(jobs, failedJob{ID: strconv.Itoa(i + 1), FinishedOn: int64(1000 + i)})
	}
	seed(t, q, bullmq.TestedVersion, jobs...)
	before := q.Digest(t)
	src := openSource(t, q, bullmq.SourceOptions{Prefetch: 3, Page: 4})
	var got []deadletter.Delivery
	for range 3 {
		got = append(got, <-src.Deliveries())
	}
	select {
	case d := <-src.Deliveries():
		t.Fatalf("a fourth delivery (%s) with three unacknowledged", d.Message.MessageID)
	case <-time.After(200 * time.Millisecond):
	}
	if n, _ := src.Ready(); n != 7 {
		t.Errorf("Ready = %d with 3 of 10 delivered, want 7", n)
	}
	if err := src.Acknowledge(got[1].Tag); err != nil {
		t.Fatal(err)
	}
	got = append(got, receive(t, src, 2)...)
	if err := src.Acknowledge(got[2].Tag); err != nil {
		t.Fatal(err)
	}
	got = append(got, receive(t, src, 5)...)
	if fmt.Sprint(ids(got)) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Errorf("delivered %v", ids(got))
	}
	if q.Digest(t) != before {
		t.Error("acknowledging changed Redis")
	}
}

// TestSourceManyJobsAtOneScore: more jobs share a finishedOn than a page
// holds; each is delivered once.
func TestSourceManyJobsAtOneScore(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	var jobs []failedJob
	for i := range 25 {
		jobs = append(jobs, failedJob{ID: strconv.Itoa(i + 1), FinishedOn: 5000})
	}
	jobs = append(jobs, failedJob{ID: "late", FinishedOn: 6000})
	seed(t, q, bullmq.TestedVersion, jobs...)
	src := openSource(t, q, bullmq.SourceOptions{Page: 4})
	got := receive(t, src, 26)
	seen := map[string]bool{}
	for _, id := range ids(got) {
		if seen[id] {
			t.Errorf("job %s delivered twice", id)
		}
		seen[id] = true
	}
	quiet(t, src, 100*time.Millisecond)
}

// TestSourceFollow: newer failures are delivered as they come, one that
// lands behind the cursor within the window too, a job that fails again
// after a retry is a new delivery, and nothing is delivered twice.
func TestSourceFollow(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	now := time.Now().UnixMilli()
	seed(t, q, bullmq.TestedVersion, failedJob{ID: "1", FinishedOn: now - 1000}, failedJob{ID: "2", FinishedOn: now})
	src := openSource(t, q, bullmq.SourceOptions{Window: 5 * time.Second})
	receive(t, src, 2)
	quiet(t, src, 100*time.Millisecond)

	seed(t, q, "", failedJob{ID: "3", FinishedOn: now + 500})
	if got := ids(receive(t, src, 1)); got[0] != "3" {
		t.Errorf("delivered %v, want the new failure 3", got)
	}
	// A worker whose clock is two seconds behind.
	seed(t, q, "", failedJob{ID: "4", FinishedOn: now - 2000})
	if got := ids(receive(t, src, 1)); got[0] != "4" {
		t.Errorf("delivered %v, want 4, which failed behind the cursor", got)
	}
	// Job 1 retried and failed again: a new incarnation.
	seed(t, q, "", failedJob{ID: "1", FinishedOn: now + 900, Attempts: 3})
	d := receive(t, src, 1)[0]
	if d.Message.MessageID != "1" || d.Message.Native[deadletter.NativeIncarnation] != strconv.FormatInt(now+900, 10)+":3" {
		t.Errorf("delivered %s %s, want job 1's new incarnation", d.Message.MessageID, d.Message.Native[deadletter.NativeIncarnation])
	}
	quiet(t, src, 200*time.Millisecond)
	if n, err := src.Ready(); n != 0 || err != nil {
		t.Errorf("Ready = %d, %v, want 0", n, err)
	}
}

// TestSourceReadyCountsUndelivered: Ready counts the jobs not yet
// delivered while the first read is under way, not the delivered one.
func TestSourceReadyCountsUndelivered(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueue(t)
	var jobs []failedJob
	for i := range 5 {
		jobs = append(jobs, failedJob{ID: strconv.Itoa(i + 1), FinishedOn: int64(1000 + i)})
	}
	seed(t, q, bullmq.TestedVersion, jobs...)
	src := openSource(t, q, bullmq.SourceOptions{Prefetch: 1})
	deadline := time.Now().Add(5 * time.Second)
	for {
		// One is delivered and unacknowledged; the others wait.
		n, err := src.Ready()
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready = %d, want 4", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
