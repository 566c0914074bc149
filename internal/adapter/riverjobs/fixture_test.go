package riverjobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// riverDB is a database of the test's own with River's schema at the
// latest migration of the River module in go.mod, and nothing of
// expiryctl's: River's database is never expiryctl's archive.
type riverDB struct {
	URL  string
	Pool *pgxpool.Pool
	// PG is the test database of the main cluster, nil on a private one.
	PG *pgtest.Database
}

func newRiverDB(t testing.TB) *riverDB {
	t.Helper()
	db := pgtest.NewEmpty(t)
	migrateRiver(t, db.Pool)
	return &riverDB{URL: db.URL, Pool: db.Pool, PG: db}
}

func migrateRiver(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatalf("river migrator: %v", err)
	}
	if _, err := migrator.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("river migrate up: %v", err)
	}
}

// ref names queue in db as the login of its URL, with extra settings.
func (db *riverDB) ref(t testing.TB, queue string, query ...string) riverjobs.Ref {
	t.Helper()
	return refFor(t, db.URL, queue, query...)
}

func refFor(t testing.TB, dbURL, queue string, query ...string) riverjobs.Ref {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := append([]string{"sslmode=disable"}, query...)
	s := fmt.Sprintf("river://%s@%s%s/%s?%s", u.User.Username(), u.Host, u.Path, queue, strings.Join(q, "&"))
	ref, err := riverjobs.ParseRef(s)
	if err != nil {
		t.Fatalf("ParseRef(%s): %v", s, err)
	}
	return ref
}

// failedJob is a river_job row as a River client leaves a job it gave up
// on; seed writes it the way River's completer does.
type failedJob struct {
	Queue, Kind, State string
	Args               string // jsonb text
	Attempt, Max       int
	Errors             []map[string]any
	FinalizedAt        time.Time
	Metadata           string
	Tags               []string
	UniqueKey          []byte
}

// seed inserts j and returns its id.
func (db *riverDB) seed(t testing.TB, j failedJob) int64 {
	t.Helper()
	if j.Queue == "" {
		j.Queue = "expiry"
	}
	if j.Kind == "" {
		j.Kind = "reservation_expiry"
	}
	if j.State == "" {
		j.State = "discarded"
	}
	if j.Args == "" {
		j.Args = `{"reservation_id":"r-1","idempotency_key":"expire:r-1:v1"}`
	}
	if j.Attempt == 0 {
		j.Attempt, j.Max = 3, 3
	}
	if j.Errors == nil {
		for a := 1; a <= j.Attempt; a++ {
			j.Errors = append(j.Errors, map[string]any{"at": time.Now().UTC().Format(time.RFC3339Nano), "attempt": a,
				"error": fmt.Sprintf("db_timeout: attempt %d", a), "trace": ""})
		}
	}
	if j.FinalizedAt.IsZero() {
		j.FinalizedAt = time.Now()
	}
	if j.Metadata == "" {
		j.Metadata = "{}"
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	errs := make([]string, len(j.Errors))
	for i, e := range j.Errors {
		b, _ := json.Marshal(e)
		errs[i] = string(b)
	}
	var id int64
	err := db.Pool.QueryRow(context.Background(), `INSERT INTO river_job
		(state, attempt, max_attempts, attempted_at, finalized_at, scheduled_at, args, attempted_by, errors, kind, metadata, queue, tags, unique_key)
		VALUES ($1::river_job_state, $2, $3, $4, $4, $4, $5::jsonb, '{host-1}', $6::jsonb[], $7, $8::jsonb, $9, $10, $11)
		RETURNING id`,
		j.State, j.Attempt, j.Max, j.FinalizedAt, j.Args, errs, j.Kind, j.Metadata, j.Queue, j.Tags, j.UniqueKey).Scan(&id)
	if err != nil {
		t.Fatalf("seed a River job: %v", err)
	}
	return id
}

// worked makes River know queue as a River client working it does, with
// a river_queue row (River's producer upserts one when it starts), jobs
// or none: a queue a capture may follow before anything failed there.
func (db *riverDB) worked(t testing.TB, queue string) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO river_queue (name, created_at, metadata, updated_at)
		VALUES ($1, now(), '{}', now()) ON CONFLICT (name) DO UPDATE SET updated_at = now()`, queue); err != nil {
		t.Fatalf("a river_queue row for %s: %v", queue, err)
	}
}

// openSource opens a source on ref that polls often, closed when t ends.
func openSource(t testing.TB, ref riverjobs.Ref, opts riverjobs.SourceOptions) *riverjobs.Source {
	t.Helper()
	if opts.Poll == 0 {
		opts.Poll = 50 * time.Millisecond
	}
	src, err := riverjobs.OpenSource(context.Background(), ref, opts)
	if err != nil {
		t.Fatalf("OpenSource: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// receive takes n deliveries from src, failing t when they do not come
// within a while.
func receive(t testing.TB, src *riverjobs.Source, n int) []deadletter.Delivery {
	t.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				t.Fatalf("deliveries ended after %d of %d: %v", len(got), n, src.Err())
			}
			got = append(got, d)
		case <-deadline:
			t.Fatalf("received %d of %d jobs", len(got), n)
		}
	}
	return got
}

// quiet fails t when src delivers anything within d.
func quiet(t testing.TB, src *riverjobs.Source, d time.Duration) {
	t.Helper()
	select {
	case got, ok := <-src.Deliveries():
		if ok {
			t.Fatalf("unexpected delivery of job %s (incarnation %s)", got.Message.MessageID, got.Message.Native[deadletter.NativeIncarnation])
		}
	case <-time.After(d):
	}
}

// tableDigest is a digest of every row of River's tables with the
// transaction that last wrote it (xmin), to show that capture wrote none
// of them, not even an update to the same values.
func (db *riverDB) tableDigest(t testing.TB) string {
	t.Helper()
	var digest string
	err := db.Pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT md5(string_agg(j.xmin::text || j::text, '|' ORDER BY id)) FROM river_job j), '') || '/' ||
		coalesce((SELECT md5(string_agg(q.xmin::text || q::text, '|' ORDER BY name)) FROM river_queue q), '')`).Scan(&digest)
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// pgxTx is the transaction type of a River client on pgx.
type pgxTx = pgx.Tx

// openFollow are a source's options for a test that waits on new
// failures: it polls often.
func openFollow() riverjobs.SourceOptions {
	return riverjobs.SourceOptions{Poll: 20 * time.Millisecond}
}

func idText(id int64) string { return strconv.FormatInt(id, 10) }
