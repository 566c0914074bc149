package pgjobs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// jobsDB is a database of the test's own with the least job store the
// package serves: one job table whose failed jobs have a time of failure
// and an id, as River's and pg-boss's have.
type jobsDB struct {
	*pgtest.Database
}

func newJobsDB(t testing.TB) *jobsDB {
	t.Helper()
	db := &jobsDB{pgtest.NewEmpty(t)}
	db.exec(t, `CREATE TABLE job (id bigserial PRIMARY KEY, queue text NOT NULL DEFAULT 'expiry',
		state text NOT NULL DEFAULT 'failed', failed_at timestamptz NOT NULL DEFAULT now(), body text NOT NULL DEFAULT '{}', marks jsonb)`)
	return db
}

func (db *jobsDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// fail makes one failed job of queue expiry that failed at at, and
// returns its id.
func (db *jobsDB) fail(t testing.TB, at time.Time) int64 {
	t.Helper()
	var id int64
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO job (failed_at) VALUES ($1) RETURNING id`, at).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// store is the database as the package names it.
func (db *jobsDB) store() pgjobs.Database {
	return pgjobs.Database{System: "toy", Title: "Toy", Name: strconv.Quote(db.Name), Jobs: "job"}
}

func (db *jobsDB) config(t testing.TB) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// job is a row of the job table as a page reads it.
type job struct {
	ID       int64     `db:"id"`
	FailedAt time.Time `db:"failed_at"`
	Body     string    `db:"body"`
}

type key = pgjobs.Key[int64]

// queue is queue expiry of the job table as a Poller reads it.
var queue = pgjobs.Queue[int64, job]{
	Name: "toy://jobs/expiry",
	Page: func(from key, n int) (string, []any) {
		return `SELECT id, failed_at, body FROM job WHERE queue = 'expiry' AND state = 'failed'
			AND failed_at >= $1 AND (failed_at, id) > ($1, $2) ORDER BY failed_at, id LIMIT $3`, []any{from.At, from.ID, n}
	},
	Scan: pgx.RowToStructByName[job],
	Key:  func(j job) key { return key{At: j.FailedAt.UTC(), ID: j.ID} },
	Letter: func(j job) deadletter.Message {
		return deadletter.StoredJob{System: "toy", Queue: "toy://jobs/expiry", ID: strconv.FormatInt(j.ID, 10),
			Incarnation: j.FailedAt.UTC().Format(time.RFC3339Nano), Payload: []byte(j.Body), FailedAt: j.FailedAt, Attempts: 1}.Message()
	},
	Ahead: func(cursor key) (string, []any) {
		return `SELECT count(*) FROM job WHERE queue = 'expiry' AND state = 'failed'
			AND failed_at >= $1 AND (failed_at, id) > ($1, $2)`, []any{cursor.At, cursor.ID}
	},
	Behind: func(since time.Time, cursor key) (string, []any) {
		return `SELECT failed_at, id FROM job WHERE queue = 'expiry' AND state = 'failed'
			AND failed_at >= $1 AND (failed_at, id) <= ($2, $3)`, []any{since, cursor.At, cursor.ID}
	},
}

// openPoller opens a poller on the job table's queue that polls often,
// closed when t ends.
func openPoller(t testing.TB, db *jobsDB, opts pgjobs.Options) *pgjobs.Poller[int64, job] {
	t.Helper()
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	p, err := pgjobs.OpenPoller(context.Background(), db.config(t), db.store(), noCheck, queue, opts)
	if err != nil {
		t.Fatalf("OpenPoller: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func noCheck(context.Context, *pgxpool.Pool) error { return nil }

// receive takes n deliveries from p, failing t when they do not come
// within a while.
func receive(t testing.TB, p *pgjobs.Poller[int64, job], n int) []deadletter.Delivery {
	t.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case d, ok := <-p.Deliveries():
			if !ok {
				t.Fatalf("deliveries ended after %d of %d: %v", len(got), n, p.Err())
			}
			got = append(got, d)
		case <-deadline:
			t.Fatalf("received %d of %d jobs", len(got), n)
		}
	}
	return got
}

// quiet fails t when p delivers anything within d.
func quiet(t testing.TB, p *pgjobs.Poller[int64, job], d time.Duration) {
	t.Helper()
	select {
	case got, ok := <-p.Deliveries():
		if ok {
			t.Fatalf("unexpected delivery of job %s", got.Message.MessageID)
		}
	case <-time.After(d):
	}
}

// ready is p's Ready, failing t on an error.
func ready(t testing.TB, p *pgjobs.Poller[int64, job]) int {
	t.Helper()
	n, err := p.Ready()
	if err != nil {
		t.Fatalf("Ready: %v", err)
	}
	return n
}
