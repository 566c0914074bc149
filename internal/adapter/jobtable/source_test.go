package jobtable_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// TestSourceDeliversEveryFailedRowWhole is what the conformance suite's
// first case checks, held to this driver, for each payload type: the
// payload exactly as the column gives it (bytes for bytea, text as
// written, jsonb's own text form), the failure's time, attempts and
// error, and the mapped native columns; rows in other states are not
// delivered.
func TestSourceDeliversEveryFailedRowWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		payloadType string
		payloads    [][]byte
		// want is the payload as delivered, nil: as given.
		want [][]byte
	}{
		{"bytea", [][]byte{
			[]byte(`{"reservation_id":"r-1"}`),
			[]byte("{\"reservation_id\":\"r-\u00e9\u6f22\",\"note\":\"<&>\\\"'\"}"),
			[]byte("not json \x01"),
			{0x00, 0xff, 0xfe, '{', 0x80},
		}, nil},
		{"text", [][]byte{[]byte("not json \x01 at all"), []byte(`{ "spaced" :  true }`)}, nil},
		{"jsonb", [][]byte{[]byte(`{ "b": 1,  "a": [1,2] }`)}, [][]byte{[]byte(`{"a": [1, 2], "b": 1}`)}},
	} {
		t.Run(tc.payloadType, func(t *testing.T) {
			t.Parallel()
			db := newJobsDB(t, tc.payloadType)
			db.insert(t, job{Status: "pending"})
			db.insert(t, job{Status: "done"})
			ids := make([]string, len(tc.payloads))
			base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
			for i, p := range tc.payloads {
				ids[i] = db.insert(t, job{Payload: p, Reservation: "r-whole", Attempts: 4, FailedAt: base.Add(time.Duration(i) * time.Second)})
			}
			src := openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{})
			if want := "jobtable://" + testConnection + "/" + db.Mapping.Table; src.QueueName() != want {
				t.Errorf("QueueName() = %s, want %s: the connection's name, never the server", src.QueueName(), want)
			}
			got := receive(t, src, len(ids))
			for i, d := range got {
				m := d.Message
				if m.MessageID != ids[i] {
					t.Fatalf("delivery %d is job %s, want %s (in failed_at order)", i, m.MessageID, ids[i])
				}
				want := tc.payloads[i]
				if tc.want != nil {
					want = tc.want[i]
				}
				if !bytes.Equal(m.Body, want) {
					t.Errorf("job %s: payload %q, want %q", m.MessageID, m.Body, want)
				}
				if m.System != jobtable.System || m.Queue != src.QueueName() {
					t.Errorf("job %s: system %q queue %q; want jobtable, %q", m.MessageID, m.System, m.Queue, src.QueueName())
				}
				if !m.Timestamp.Equal(base.Add(time.Duration(i) * time.Second)) {
					t.Errorf("job %s: failed at %s, want %s", m.MessageID, m.Timestamp, base.Add(time.Duration(i)*time.Second))
				}
				if m.Native[deadletter.NativeJobID] != m.MessageID || m.Native[deadletter.NativeIncarnation] == "" {
					t.Errorf("job %s: native id %q, incarnation %q", m.MessageID, m.Native[deadletter.NativeJobID], m.Native[deadletter.NativeIncarnation])
				}
				for _, col := range []string{"reservation_id", "hold_until", "idempotency_key", "status", "run_at"} {
					if m.Native[col] == "" {
						t.Errorf("job %s: native %s missing: %v", m.MessageID, col, m.Native)
					}
				}
				if _, leaked := m.Native["worker_host"]; leaked {
					t.Errorf("job %s: an unmapped column was read", m.MessageID)
				}
				l := deadletter.Parse(m, nil, time.Now())
				if l.Attempts != 4 || l.LastError == "" {
					t.Errorf("job %s: %d attempts, last error %q", m.MessageID, l.Attempts, l.LastError)
				}
			}
			if n, err := src.Ready(); err != nil || n != 0 {
				t.Errorf("Ready = %d, %v once every failed row is delivered; rows in other states are not letters", n, err)
			}
		})
	}
}

// TestIncarnationWithoutAFailedAtColumn: without a time of failure, a
// failure is told from the next by attempts, the last error and the
// marks of the replay before it, so that a row a replay put back with
// its attempts reset, failing again with the same count and error, is a
// new letter; and a history column gives the errors.
func TestIncarnationWithoutAFailedAtColumn(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	db.exec(t, `ALTER TABLE public.reservation_expiry_jobs ADD COLUMN errors jsonb NOT NULL DEFAULT '[]'`)
	m := db.Mapping
	m.Columns.FailedAt = ""
	m.Columns.LastError = ""
	m.Columns.History = "errors"
	m.ResetAttempts = true
	url, _ := db.grantedLogin(t, "nofailedat", m)

	id := db.insert(t, job{Attempts: 3})
	db.exec(t, `UPDATE public.reservation_expiry_jobs SET errors = '[{"at":"2026-11-30T12:00:00Z","attempt":1,"error":"db_timeout"},
		"a bare string", {"message":"throttled","stack":"at x"}]' WHERE id = $1::bigint`, id)
	src := openSource(t, url, m, jobtable.SourceOptions{})
	first := receive(t, src, 1)[0].Message
	l := deadletter.Parse(first, nil, time.Now())
	if l.LastError != "throttled" || l.Attempts != 3 {
		t.Errorf("from the history: last error %q, %d attempts", l.LastError, l.Attempts)
	}
	_ = src.Close()

	r := openRetrier(t, url, m)
	if err := publish(t, r, replayOf(first, 5, 50)); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if got := db.row(t, id); got.Attempts != 0 || got.Status != "pending" {
		t.Fatalf("after a replay that resets attempts: %+v", got)
	}
	// The poller runs it three times and fails it with the same error.
	db.exec(t, `UPDATE public.reservation_expiry_jobs SET status = 'failed', attempt_count = 3 WHERE id = $1::bigint`, id)
	again := receive(t, openSource(t, url, m, jobtable.SourceOptions{}), 1)[0].Message
	if again.Native[deadletter.NativeIncarnation] == first.Native[deadletter.NativeIncarnation] {
		t.Errorf("the failure after a replay has the incarnation of the one before: %s", first.Native[deadletter.NativeIncarnation])
	}
	if again.Headers["x-replay-request"] != int64(5) {
		t.Errorf("the new failure does not link to replay 5: %v", again.Headers)
	}
	// The letter captured before the replay is stale now.
	if err := publish(t, r, replayOf(first, 6, 50)); err == nil {
		t.Error("a replay of the stale failure put the row back")
	}
}

// privateJobsDB is a jobs table on a PostgreSQL cluster of the test's
// own, which the test may stop: the machine's main PostgreSQL is never
// restarted.
func privateJobsDB(t *testing.T) (*servers.PostgreSQL, *jobsDB) {
	t.Helper()
	pg := servers.StartPostgreSQL(t)
	url := pgtest.WithDatabase(pg.AdminURL, "postgres")
	db := &jobsDB{Admin: pgtest.Connect(t, url), URL: url, Mapping: reservationMapping(), payloadType: "jsonb"}
	db.exec(t, jobsTable("jsonb"))
	return pg, db
}

func TestSourceKeepsGoingAcrossARestartOfTheDatabase(t *testing.T) {
	t.Parallel()
	pg, db := privateJobsDB(t)
	db.insert(t, job{FailedAt: time.Now().Add(-time.Minute)})
	src := openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{Poll: 50 * time.Millisecond, Reconnect: time.Minute})
	receive(t, src, 1)

	pg.Stop(t)
	time.Sleep(time.Second) // polls fail meanwhile and are tried again
	pg.Start(t)
	late := db.insert(t, job{})
	got := receive(t, src, 1)[0]
	if got.Message.MessageID != late {
		t.Errorf("after the restart: job %s, want %s", got.Message.MessageID, late)
	}
	if err := src.Err(); err != nil {
		t.Errorf("Err after a restart: %v", err)
	}
}

func TestSourceReportsALastingLossOfTheDatabase(t *testing.T) {
	t.Parallel()
	pg, db := privateJobsDB(t)
	db.insert(t, job{})
	src := openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{Poll: 50 * time.Millisecond, Reconnect: 2 * time.Second})
	receive(t, src, 1)
	pg.Stop(t)
	select {
	case _, ok := <-src.Deliveries():
		if ok {
			t.Fatal("a delivery from a stopped server")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deliveries did not end while the database stayed lost")
	}
	if src.Err() == nil {
		t.Error("the deliveries ended with no Err")
	}
	t.Log(src.Err())
}

// TestSourceIngestsIntoTheArchive runs deadletter's own ingest over a
// source: the archive takes the letters (its constraints on a job
// store's system, queue and identity included), and a second capture
// stores nothing twice.
func TestSourceIngestsIntoTheArchive(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	for range 3 {
		db.insert(t, job{})
	}
	archive := pgtest.New(t)
	for i := range 2 {
		src := openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{})
		stats, err := deadletter.Ingest(context.Background(), archive.Pool, src,
			deadletter.IngestOptions{Actor: "capture", Queue: src.QueueName(), Linger: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("ingest %d: %v", i+1, err)
		}
		want := int64(3)
		if i == 1 {
			want = 0
		}
		if stats.Received != 3 || stats.Stored != want {
			t.Errorf("ingest %d: %+v; want 3 received, %d stored", i+1, stats, want)
		}
		_ = src.Close()
	}
}
