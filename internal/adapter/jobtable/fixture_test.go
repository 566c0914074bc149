package jobtable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// jobsDB is a database of the test's own holding a team's jobs table
// shaped like the reservation-expiry jobs of the message contract, and
// nothing of expiryctl's: the team's database is never expiryctl's
// archive. Admin is the team's own login (a superuser here), which
// makes, fails and works the jobs; the driver connects as Login, granted
// exactly what GrantSQL says.
type jobsDB struct {
	Admin   *pgxpool.Pool
	URL     string
	Mapping jobtable.Mapping
	// Login reaches the database as the driver's login.
	Login       string
	payloadType string
	pg          *pgtest.Database
}

// jobsTable is the team's table: payloadType is jsonb as the contract's
// producers write it, or bytea or text for a producer that stores bytes.
// worker_host is a column the mapping leaves out, so that the driver's
// login has no privilege on it.
func jobsTable(payloadType string) string {
	return `CREATE TABLE public.reservation_expiry_jobs (
		id bigserial PRIMARY KEY,
		reservation_id text NOT NULL,
		hold_until timestamptz NOT NULL,
		attempt_count int NOT NULL DEFAULT 0,
		idempotency_key text NOT NULL,
		payload ` + payloadType + ` NOT NULL,
		status text NOT NULL DEFAULT 'pending',
		last_error text,
		run_at timestamptz NOT NULL DEFAULT now(),
		failed_at timestamptz,
		worker_host text,
		expiryctl_marks jsonb
	);
	CREATE INDEX reservation_expiry_jobs_status ON public.reservation_expiry_jobs (status, run_at)`
}

// reservationMapping maps jobsTable.
func reservationMapping() jobtable.Mapping {
	return jobtable.Mapping{
		Table: "public.reservation_expiry_jobs",
		Columns: jobtable.Columns{
			ID: "id", Payload: "payload", Attempts: "attempt_count", LastError: "last_error",
			Status: "status", DueAt: "run_at", FailedAt: "failed_at", Marks: "expiryctl_marks",
			Native: []string{"reservation_id", "hold_until", "idempotency_key"},
		},
		FailedStates: []string{"failed", "dead"},
		ReplayState:  "pending",
	}
}

// newJobsDB makes the table and the driver's login, granted GrantSQL's
// statements and nothing else.
func newJobsDB(t testing.TB, payloadType string) *jobsDB {
	t.Helper()
	pg := pgtest.NewEmpty(t)
	db := &jobsDB{Admin: pg.Pool, Mapping: reservationMapping(), payloadType: payloadType, pg: pg}
	db.exec(t, jobsTable(payloadType))
	db.URL, db.Login = db.grantedLogin(t, "jobtable", db.Mapping)
	return db
}

// grantedLogin makes a login and runs GrantSQL's statements for it.
func (db *jobsDB) grantedLogin(t testing.TB, person string, m jobtable.Mapping) (url, name string) {
	t.Helper()
	l := db.newLogin(t, person)
	grants, err := jobtable.GrantSQL(m, l.Name)
	if err != nil {
		t.Fatalf("GrantSQL: %v", err)
	}
	for _, g := range grants {
		db.exec(t, g)
	}
	return l.URL, l.Name
}

// newLogin makes a login with no privilege of its own, whose grants are
// dropped before the login is.
func (db *jobsDB) newLogin(t testing.TB, person string) *pgtest.Login {
	t.Helper()
	l := db.pg.Login(t, person)
	t.Cleanup(func() { db.exec(t, "DROP OWNED BY "+pgx.Identifier{l.Name}.Sanitize()) })
	return l
}

func (db *jobsDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Admin.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// job is a row of the team's table; zero fields take a failed job's
// usual values.
type job struct {
	Reservation string
	Payload     []byte
	Attempts    int
	Status      string
	LastError   string
	FailedAt    time.Time
	RunAt       time.Time
}

// insert writes j as the team's poller leaves a job, and returns its id.
func (db *jobsDB) insert(t testing.TB, j job) string {
	t.Helper()
	if j.Reservation == "" {
		j.Reservation = fmt.Sprintf("r-%d", time.Now().UnixNano())
	}
	if j.Payload == nil {
		j.Payload = contractPayload(j.Reservation, 3)
	}
	if j.Status == "" {
		j.Status = "failed"
	}
	if j.Status == "failed" {
		if j.Attempts == 0 {
			j.Attempts = 5
		}
		if j.LastError == "" {
			j.LastError = "db_timeout: canceling statement due to statement timeout"
		}
		if j.FailedAt.IsZero() {
			j.FailedAt = time.Now()
		}
	}
	if j.RunAt.IsZero() {
		j.RunAt = time.Now()
	}
	var failedAt, lastError any
	if !j.FailedAt.IsZero() {
		failedAt = j.FailedAt
	}
	if j.LastError != "" {
		lastError = j.LastError
	}
	var id int64
	err := db.Admin.QueryRow(context.Background(), `INSERT INTO public.reservation_expiry_jobs
		(reservation_id, hold_until, attempt_count, idempotency_key, payload, status, last_error, run_at, failed_at, worker_host)
		VALUES ($1, now() + interval '15 minutes', $2, 'expire:' || $1 || ':v3', $3, $4, $5, $6, $7, 'worker-7')
		RETURNING id`, j.Reservation, j.Attempts, db.payloadArg(j.Payload), j.Status, lastError, j.RunAt, failedAt).Scan(&id)
	if err != nil {
		t.Fatalf("insert a job: %v", err)
	}
	return strconv.FormatInt(id, 10)
}

// payloadArg is p as the payload column takes it: text for jsonb and
// text, bytes for bytea.
func (db *jobsDB) payloadArg(p []byte) any {
	if db.payloadType == "bytea" {
		return p
	}
	return string(p)
}

// contractPayload is an expiry job's body as the message contract has it.
func contractPayload(reservation string, version int) []byte {
	b, _ := json.Marshal(map[string]any{"reservation_id": reservation, "expected_version": version,
		"hold_until": "2026-11-30T12:20:00Z", "idempotency_key": fmt.Sprintf("expire:%s:v%d", reservation, version)})
	return b
}

// row is what the test reads back of a job.
type row struct {
	Status   string
	Attempts int
	RunAt    time.Time
	Marks    map[string]any
}

func (db *jobsDB) row(t testing.TB, id string) row {
	t.Helper()
	var r row
	var marks []byte
	err := db.Admin.QueryRow(context.Background(), `SELECT status, attempt_count, run_at, expiryctl_marks
		FROM public.reservation_expiry_jobs WHERE id = $1::bigint`, id).Scan(&r.Status, &r.Attempts, &r.RunAt, &marks)
	if err != nil {
		t.Fatalf("read job %s: %v", id, err)
	}
	if marks != nil {
		if err := json.Unmarshal(marks, &r.Marks); err != nil {
			t.Fatalf("job %s: marks %s: %v", id, marks, err)
		}
	}
	return r
}

// digest is a digest of every row, every column.
func (db *jobsDB) digest(t testing.TB) string {
	t.Helper()
	var d string
	if err := db.Admin.QueryRow(context.Background(), `SELECT coalesce(md5(string_agg(j::text, '|' ORDER BY id)), '')
		FROM public.reservation_expiry_jobs j`).Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// testConnection is the name the tests' configuration gives the
// connection to a test's database.
const testConnection = "team-jobs"

// tableRef is table on the connection testConnection, whose url is url,
// as the operator's configuration names it.
func tableRef(t testing.TB, url, table string) jobtable.Ref {
	t.Helper()
	ref, err := jobtable.RefFor(config.Connection{Name: testConnection, System: jobtable.System, URLs: []string{url}}, "", table)
	if err != nil {
		t.Fatalf("RefFor: %v", err)
	}
	return ref
}

// openSource opens a source on m's table in the database at url, closed
// when t ends.
func openSource(t testing.TB, url string, m jobtable.Mapping, opts jobtable.SourceOptions) *jobtable.Source {
	t.Helper()
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	src, err := jobtable.OpenSource(context.Background(), tableRef(t, url, m.Table), m, opts)
	if err != nil {
		t.Fatalf("OpenSource: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// openRetrier opens a retrier on m's table in the database at url,
// closed when t ends.
func openRetrier(t testing.TB, url string, m jobtable.Mapping) *jobtable.Retrier {
	t.Helper()
	r, err := jobtable.OpenRetrier(context.Background(), tableRef(t, url, m.Table), m, jobtable.RetrierOptions{})
	if err != nil {
		t.Fatalf("OpenRetrier: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// receive takes n deliveries, failing t when they do not come.
func receive(t testing.TB, src *jobtable.Source, n int) []deadletter.Delivery {
	t.Helper()
	var got []deadletter.Delivery
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				t.Fatalf("deliveries ended after %d of %d: %v", len(got), n, src.Err())
			}
			got = append(got, d)
		case <-deadline:
			t.Fatalf("received %d of %d rows", len(got), n)
		}
	}
	return got
}

// capture reads the failed rows with a source of its own and returns them
// by id.
func capture(t testing.TB, db *jobsDB, n int) map[string]deadletter.Message {
	t.Helper()
	src := openSource(t, db.URL, db.Mapping, jobtable.SourceOptions{})
	out := map[string]deadletter.Message{}
	for _, d := range receive(t, src, n) {
		out[d.Message.MessageID] = d.Message
	}
	_ = src.Close()
	return out
}

// replayOf is the message a replay's runner sends for letter m as item
// of request.
func replayOf(m deadletter.Message, request, item int64) replay.Message {
	return replay.Message{
		Item: item, RoutingKey: m.Queue, System: jobtable.System, Body: m.Body,
		Job: replay.JobRef{ID: m.Native[deadletter.NativeJobID], Incarnation: m.Native[deadletter.NativeIncarnation]},
		Headers: map[string]any{
			replay.HeaderReplayRequest: request, replay.HeaderReplayItem: item,
			replay.HeaderReplayCount: int64(1), replay.HeaderReplayedBy: "alice", replay.HeaderApprovedBy: "bob",
		},
	}
}

// publish sends m and waits for its outcome.
func publish(t testing.TB, b replay.Broker, m replay.Message) error {
	t.Helper()
	p, err := b.Publish(context.Background(), m)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-p.Done():
		return p.Outcome()
	case <-time.After(30 * time.Second):
		t.Fatal("the retry did not settle")
		return nil
	}
}
