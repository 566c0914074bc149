package pgboss_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/pgbosstest"
)

// TestSourceCapturesWhatPgBossWorkerFailed: a real pg-boss worker fails a
// job on both of its attempts; the letter is that job as the contract
// describes it, read from pg-boss's own row.
func TestSourceCapturesWhatPgBossWorkerFailed(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", pgbosstest.Options{"retryLimit": 1, "retryDelay": 0})
	b.Work()
	id := b.SendJobs(nil, []byte(`{"reservation_id":"r-1","idempotency_key":"expire:r-1:v1"}`))[0]
	row := b.WaitState(id, "failed")
	if got := len(b.Seen("failing")); got != 2 {
		t.Fatalf("the worker failed the job %d times, want 2", got)
	}
	ref := db.Ref(t, "expiry")
	m := capture(t, ref, 1)[0].Message

	if m.System != pgboss.System || m.Queue != ref.Name() || m.MessageID != id || m.Type != "expiry" {
		t.Errorf("letter %s of %s on %s, type %s; want job %s of pgboss on %s", m.MessageID, m.System, m.Queue, m.Type, id, ref.Name())
	}
	if string(m.Body) != `{"reservation_id": "r-1", "idempotency_key": "expire:r-1:v1"}` || m.ContentType != "application/json" {
		t.Errorf("payload %s (%s), want data::text", m.Body, m.ContentType)
	}
	if !m.Timestamp.Equal(*row.CompletedOn) || m.Native[deadletter.NativeIncarnation] != pgboss.Incarnation(*row.CompletedOn) {
		t.Errorf("failed at %s, incarnation %s; want completed_on %s", m.Timestamp, m.Native[deadletter.NativeIncarnation], row.CompletedOn)
	}
	l := deadletter.Parse(m, nil, time.Now())
	if l.Attempts != 2 || l.LastError != "db_timeout: reservation r-1 lock wait exceeded" || l.ReservationID != "r-1" {
		t.Errorf("attempts %d, last error %q, reservation %q; want 2, the worker's error, r-1", l.Attempts, l.LastError, l.ReservationID)
	}
	for key, want := range map[string]string{deadletter.NativeJobID: id, deadletter.NativeKind: "expiry", deadletter.NativeMaxAttempts: "2",
		"name": "expiry", "state": "failed", "retry_count": "1", "retry_limit": "1", "policy": "standard"} {
		if got := m.Native[key]; got != want {
			t.Errorf("native %s = %q, want %q", key, got, want)
		}
	}
	if !strings.Contains(m.Native["output"], "db_timeout: reservation r-1") || m.Native["started_on"] == "" || m.Native["keep_until"] == "" {
		t.Errorf("native output %q, started_on %q, keep_until %q", m.Native["output"], m.Native["started_on"], m.Native["keep_until"])
	}
	history, ok := m.Headers["x-attempt-history"].([]any)
	if !ok || len(history) != 1 {
		t.Fatalf("attempt history %#v; want the last attempt, which is all pg-boss keeps", m.Headers["x-attempt-history"])
	}
	last := history[0].(map[string]any)
	if last["attempt"] != int64(2) || !strings.HasPrefix(last["trace"].(string), "Error: db_timeout: reservation r-1") {
		t.Errorf("the last attempt %#v; want attempt 2 with the worker's stack", last)
	}
	if _, ok := m.Headers["x-replay-request"]; ok {
		t.Error("a job no replay touched carries replay marks")
	}
}

// TestSourceReadsAJobWithNoData: pg-boss sends a job with no data as SQL
// NULL, which its worker reads as null.
func TestSourceReadsAJobWithNoData(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.Send(map[string]any{"cmd": "failNow", "jobs": []map[string]any{{}}})
	b.Await("failed", "")
	m := capture(t, db.Ref(t, "expiry"), 1)[0].Message
	if string(m.Body) != "null" {
		t.Errorf("payload %q, want null", m.Body)
	}
}

// TestSourceCapturesFromAnotherSchemaAndAQueuesOwnPartition: pg-boss
// under a schema of its own, and a queue created with partition: true,
// whose jobs live in a table of their own under pg-boss's job table; the
// driver reads the parent table by queue name.
func TestSourceCapturesFromAnotherSchemaAndAQueuesOwnPartition(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.NewIn(t, "jobs_boss", "expiry", pgbosstest.Options{"retryLimit": 0, "partition": true})
	b.CreateQueue("mail", pgbosstest.Options{"retryLimit": 0})
	ids := b.FailJobs(reservations(1, 3)...)
	var partition string
	if err := db.Pool.QueryRow(context.Background(), `SELECT table_name FROM jobs_boss.queue WHERE name = 'expiry' AND partition`).Scan(&partition); err != nil {
		t.Fatalf("the queue has no partition of its own: %v", err)
	}
	ref := db.Ref(t, "expiry")
	if ref.Schema != "jobs_boss" {
		t.Fatalf("schema %q", ref.Schema)
	}
	got := capture(t, ref, 3)
	for i, d := range got {
		if d.Message.MessageID != ids[i] {
			t.Errorf("delivery %d is job %s, want %s (in the order pg-boss failed them)", i, d.Message.MessageID, ids[i])
		}
	}
	if _, err := pgboss.OpenSource(context.Background(), pgbosstest.RefFor(t, db.URL, "expiry"), pgboss.SourceOptions{}); err == nil ||
		!strings.Contains(err.Error(), `no pg-boss schema "pgboss"`) || !strings.Contains(err.Error(), "?schema=NAME") {
		t.Errorf("a source on the default schema, where pg-boss is not: %v; want it refused, saying how to name the schema", err)
	}
}

// TestSourceNeverWritesPgBossTables: a capture leaves every row of
// pg-boss's tables as it was, down to the transaction that last wrote it.
func TestSourceNeverWritesPgBossTables(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	b.FailJobs(reservations(1, 4)...)
	before := db.TableDigest(t)
	src := openSource(t, db.Ref(t, "expiry"), pgboss.SourceOptions{})
	got := receive(t, src, 4)
	if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready = %d, %v", n, err)
	}
	_ = src.Close()
	if n, err := src.Ready(); err != nil || n != 0 {
		t.Errorf("Ready after Close = %d, %v", n, err)
	}
	if after := db.TableDigest(t); after != before {
		t.Error("capture changed pg-boss's tables")
	}
}

// TestSourceFollowsAndLooksBack: a following source delivers jobs that
// fail after it opened, and a job whose failure committed after a later
// one's, behind its newest delivery within the lookback.
func TestSourceFollowsAndLooksBack(t *testing.T) {
	t.Parallel()
	db, b := pgbosstest.New(t, "expiry", nil)
	src := openSource(t, db.Ref(t, "expiry"), pgboss.SourceOptions{})
	first := b.FailJobs(reservations(1, 1)...)[0]
	if got := receive(t, src, 1)[0].Message.MessageID; got != first {
		t.Fatalf("delivered %s, want %s", got, first)
	}
	// A job pg-boss failed in a transaction that began before the first's
	// but committed after it: its completed_on is behind the cursor.
	late := b.SendJobs(nil, reservations(2, 1)...)[0]
	db.Exec(t, `UPDATE {job} SET state = 'failed', started_on = now(), completed_on = (SELECT completed_on FROM {job} WHERE id = $1::uuid) - interval '1 second'
		WHERE name = 'expiry' AND id = $2::uuid`, first, late)
	if got := receive(t, src, 1)[0].Message.MessageID; got != late {
		t.Errorf("delivered %s, want the late job %s", got, late)
	}
	select {
	case d := <-src.Deliveries():
		t.Errorf("job %s delivered again", d.Message.MessageID)
	case <-time.After(200 * time.Millisecond):
	}
}
