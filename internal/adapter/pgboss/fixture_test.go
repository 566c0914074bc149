package pgboss_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/fixture/nodetest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// wait bounds every wait of these tests on pg-boss or a source.
const wait = 30 * time.Second

// bossDB is a database of the test's own in which a real pg-boss (the
// release e2e/node/package-lock.json pins) installed its schema, and
// nothing of expiryctl's: pg-boss's database is never expiryctl's archive.
type bossDB struct {
	// URL reaches the database as the server's administrator.
	URL  string
	Pool *pgxpool.Pool
	PG   *pgtest.Database
	// Schema is pg-boss's schema there.
	Schema string
}

// boss is e2e/node/pgboss_worker.js on one queue of a bossDB: a real
// pg-boss producer and worker, driven by commands on its stdin.
type boss struct {
	tb     testing.TB
	db     *bossDB
	queue  string
	stdin  io.WriteCloser
	events chan bossEvent

	mu  sync.Mutex
	log []bossEvent
}

// bossEvent is a line pgboss_worker.js printed: an answer to a command,
// or an attempt of its worker as it ended ("failing", "completed").
type bossEvent struct {
	Event      string          `json:"event"`
	ID         string          `json:"id"`
	IDs        []string        `json:"ids"`
	Name       string          `json:"name"`
	Data       json.RawMessage `json:"data"`
	RetryCount int             `json:"retryCount"`
	RetryLimit int             `json:"retryLimit"`
	Affected   int             `json:"affected"`
	Error      string          `json:"error"`
}

// bossOptions are a queue's options for createQueue, as pg-boss names
// them; nil: a queue whose jobs fail for good at their first failure.
type bossOptions map[string]any

// nodeDir is e2e/node, after checking that node and the pinned pg-boss
// are installed: a test of a driver against a real pg-boss proves nothing
// without one, so what is missing fails the test, with how to install it.
func nodeDir(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "e2e", "node"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		tb.Fatalf("node is not installed, and these tests run a real pg-boss: install Node.js and the tests' packages with scripts/node.sh (make node)")
	}
	if err := nodetest.Installed(dir, "pg-boss"); err != nil {
		tb.Fatalf("%v; these tests run a real pg-boss: install it with scripts/node.sh (make node)", err)
	}
	return dir
}

// newBossDB creates a database for tb and starts a real pg-boss on it,
// which installs its schema (DefaultSchema) and creates queue with
// options; the pg-boss is stopped and the database dropped when tb ends.
func newBossDB(tb testing.TB, queue string, options bossOptions) (*bossDB, *boss) {
	tb.Helper()
	return newBossDBIn(tb, pgboss.DefaultSchema, queue, options)
}

// newBossDBIn is newBossDB with pg-boss's schema option set to schema.
func newBossDBIn(tb testing.TB, schema, queue string, options bossOptions) (*bossDB, *boss) {
	tb.Helper()
	pg := pgtest.NewEmpty(tb)
	db := &bossDB{URL: pg.URL, Pool: pg.Pool, PG: pg, Schema: schema}
	return db, db.start(tb, queue, options)
}

// start runs pgboss_worker.js on queue of db, creating the queue, and
// waits until pg-boss is ready. It is stopped when tb ends.
func (db *bossDB) start(tb testing.TB, queue string, options bossOptions) *boss {
	tb.Helper()
	dir := nodeDir(tb)
	if options == nil {
		options = bossOptions{"retryLimit": 0}
	}
	cfg, _ := json.Marshal(map[string]any{"url": db.URL, "schema": db.Schema, "queue": queue, "queueOptions": options})
	path := filepath.Join(tb.TempDir(), "config.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("node", "pgboss_worker.js", path)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	b := &boss{tb: tb, db: db, queue: queue, stdin: stdin, events: make(chan bossEvent, 1000)}
	go func() {
		defer close(b.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e bossEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = bossEvent{Event: "error", Error: "not JSON: " + sc.Text()}
			}
			b.mu.Lock()
			b.log = append(b.log, e)
			b.mu.Unlock()
			b.events <- e
		}
	}()
	tb.Cleanup(func() {
		// Closing stdin stops pg-boss; one that hangs is killed rather
		// than left behind.
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	b.await("ready", "")
	return b
}

// send writes one command to pgboss_worker.js (see its header).
func (b *boss) send(cmd map[string]any) {
	b.tb.Helper()
	line, _ := json.Marshal(cmd)
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		b.tb.Fatalf("pgboss_worker.js: %v", err)
	}
}

// await waits for the next event named event (for id, when given),
// failing on an error event or after wait; events in between are kept in
// the log only.
func (b *boss) await(event, id string) bossEvent {
	b.tb.Helper()
	deadline := time.After(wait)
	for {
		select {
		case e, ok := <-b.events:
			if !ok {
				b.tb.Fatalf("pgboss_worker.js exited while the test waited for %q", event)
			}
			if e.Event == "error" {
				b.tb.Fatalf("pgboss_worker.js: %s", e.Error)
			}
			if e.Event == event && (id == "" || e.ID == id) {
				return e
			}
		case <-deadline:
			b.tb.Fatalf("pgboss_worker.js: no %q event in %s", event, wait)
		}
	}
}

// seen are the events named event the log holds so far.
func (b *boss) seen(event string) []bossEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []bossEvent
	for _, e := range b.log {
		if e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// jobsOf are pg-boss jobs of payloads, sent with options.
func jobsOf(payloads [][]byte, options map[string]any) []map[string]any {
	jobs := make([]map[string]any, len(payloads))
	for i, p := range payloads {
		jobs[i] = map[string]any{"data": json.RawMessage(p), "options": options}
	}
	return jobs
}

// reservations are the payloads of reservations r-from … r-(from+n-1).
func reservations(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"expire:r-%d:v1"}`, from+i, from+i)
	}
	return out
}

// failNow sends a job of each payload and fails them, in order, as a
// worker that fetches its own jobs does (fetch, then fail with the
// error it caught); the queue's retryLimit decides whether that was
// their last attempt. It returns their ids.
func (b *boss) failNow(payloads ...[]byte) []string {
	b.tb.Helper()
	return b.failNowWith(nil, payloads...)
}

// failNowWith is failNow of jobs sent with options (send()'s: retryLimit,
// singletonKey, …).
func (b *boss) failNowWith(options map[string]any, payloads ...[]byte) []string {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "failNow", "jobs": jobsOf(payloads, options)})
	return b.await("failed", "").IDs
}

// fetch takes n jobs with pg-boss's fetch() and leaves them active.
func (b *boss) fetch(n int) []string {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "fetch", "n": n})
	return b.await("fetched", "").IDs
}

// failNext fetches the job id, which a retry put back, and fails it.
func (b *boss) failNext(id string) {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "failNext", "id": id})
	b.await("failed", "")
}

// sendJobs sends a job of each payload with options and returns their
// ids.
func (b *boss) sendJobs(options map[string]any, payloads ...[]byte) []string {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "send", "jobs": jobsOf(payloads, options)})
	return b.await("sent", "").IDs
}

// work starts pg-boss's polling worker on the queue: it fails every job
// it takes until succeed.
func (b *boss) work() {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "work"})
	b.await("working", "")
}

// succeed has the worker complete every job from now on, but those whose
// data.reservation_id poison names.
func (b *boss) succeed(poison ...string) {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "succeed", "poison": poison})
	b.await("succeeding", "")
}

// retry is pg-boss's own retry(name, id), as someone other than
// expiryctl retries a job.
func (b *boss) retry(id string) {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "retry", "id": id})
	if e := b.await("retried", id); e.Affected != 1 {
		b.tb.Fatalf("pg-boss's retry of job %s affected %d jobs", id, e.Affected)
	}
}

// deleteJob is pg-boss's own deleteJob(name, id).
func (b *boss) deleteJob(id string) {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "delete", "id": id})
	b.await("deleted", id)
}

// createQueue creates another queue of the same pg-boss.
func (b *boss) createQueue(name string, options bossOptions) {
	b.tb.Helper()
	if options == nil {
		options = bossOptions{}
	}
	b.send(map[string]any{"cmd": "createQueue", "name": name, "options": options})
	b.await("created", name)
}

// waitState polls until job id of the boss's queue is in state, failing
// after wait.
func (b *boss) waitState(id, state string) jobState {
	b.tb.Helper()
	deadline := time.Now().Add(wait)
	for {
		s := b.db.job(b.tb, b.queue, id)
		if s.State == state {
			return s
		}
		if time.Now().After(deadline) {
			b.tb.Fatalf("job %s is %s after %s, want %s", id, s.State, wait, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ref names queue in db as the login of its URL, with extra settings.
func (db *bossDB) ref(tb testing.TB, queue string, query ...string) pgboss.Ref {
	tb.Helper()
	if db.Schema != pgboss.DefaultSchema {
		query = append(query, "schema="+db.Schema)
	}
	return refFor(tb, db.URL, queue, query...)
}

func refFor(tb testing.TB, dbURL, queue string, query ...string) pgboss.Ref {
	tb.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	q := append([]string{"sslmode=disable"}, query...)
	s := fmt.Sprintf("pgboss://%s@%s%s/%s?%s", u.User.Username(), u.Host, u.Path, queue, strings.Join(q, "&"))
	ref, err := pgboss.ParseRef(s)
	if err != nil {
		tb.Fatalf("ParseRef(%s): %v", s, err)
	}
	return ref
}

// openSource opens a source on ref that polls often, closed when tb ends.
func openSource(tb testing.TB, ref pgboss.Ref, opts pgboss.SourceOptions) *pgboss.Source {
	tb.Helper()
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	src, err := pgboss.OpenSource(context.Background(), ref, opts)
	if err != nil {
		tb.Fatalf("OpenSource: %v", err)
	}
	tb.Cleanup(func() { _ = src.Close() })
	return src
}

// receive takes n deliveries from src, failing tb when they do not come
// within wait.
func receive(tb testing.TB, src *pgboss.Source, n int) []deadletter.Delivery {
	tb.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(wait)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				tb.Fatalf("deliveries ended after %d of %d: %v", len(got), n, src.Err())
			}
			got = append(got, d)
		case <-deadline:
			tb.Fatalf("received %d of %d jobs", len(got), n)
		}
	}
	return got
}

// capture takes the n failed jobs the queue holds through a source of
// its own.
func capture(tb testing.TB, ref pgboss.Ref, n int) []deadletter.Delivery {
	tb.Helper()
	src := openSource(tb, ref, pgboss.SourceOptions{})
	got := receive(tb, src, n)
	_ = src.Close()
	return got
}

// tableDigest is a digest of every row of pg-boss's job and queue tables
// with the transaction that last wrote it (xmin), to show that something
// wrote none of them, not even an update to the same values.
func (db *bossDB) tableDigest(tb testing.TB) string {
	tb.Helper()
	var digest string
	job, queue := pgx.Identifier{db.Schema, "job"}.Sanitize(), pgx.Identifier{db.Schema, "queue"}.Sanitize()
	err := db.Pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT md5(string_agg(j.xmin::text || j::text, '|' ORDER BY name, id)) FROM `+job+` j), '') || '/' ||
		coalesce((SELECT md5(string_agg(q.xmin::text || q::text, '|' ORDER BY name)) FROM `+queue+` q), '')`).Scan(&digest)
	if err != nil {
		tb.Fatal(err)
	}
	return digest
}

// jobState is what the tests look at of a job row.
type jobState struct {
	State                  string
	RetryCount, RetryLimit int
	Started                bool
	CompletedOn            *time.Time
	StartAfter, KeepUntil  time.Time
	// Marks is trace_context's expiryctl key, Trace the rest of
	// trace_context, as JSON text ("null" when absent).
	Marks, Trace string
	XMin         int64
}

// job reads job id of queue; a job that is not there is "deleted".
func (db *bossDB) job(tb testing.TB, queue, id string) jobState {
	tb.Helper()
	var s jobState
	err := db.Pool.QueryRow(context.Background(), `SELECT state::text, retry_count, retry_limit, started_on IS NOT NULL, completed_on,
		start_after, keep_until, coalesce(trace_context -> 'expiryctl', 'null')::text,
		coalesce(trace_context - 'expiryctl', 'null')::text, xmin::text::bigint
		FROM `+pgx.Identifier{db.Schema, "job"}.Sanitize()+` WHERE name = $1 AND id = $2::uuid`, queue, id).
		Scan(&s.State, &s.RetryCount, &s.RetryLimit, &s.Started, &s.CompletedOn, &s.StartAfter, &s.KeepUntil, &s.Marks, &s.Trace, &s.XMin)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobState{State: "deleted"}
	}
	if err != nil {
		tb.Fatalf("job %s: %v", id, err)
	}
	return s
}

// exec runs sql on db as its administrator.
func (db *bossDB) exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	if _, err := db.Pool.Exec(context.Background(), db.inSchema(sql), args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// inSchema is sql with {job} and {queue} for pg-boss's tables.
func (db *bossDB) inSchema(sql string) string {
	return strings.NewReplacer("{job}", pgx.Identifier{db.Schema, "job"}.Sanitize(), "{queue}", pgx.Identifier{db.Schema, "queue"}.Sanitize()).Replace(sql)
}

// stored is what pg-boss keeps of a job sent with the JSON text payload,
// as capture reads it back (data::text), and whether pg-boss can keep it
// at all: pg-boss's send takes a JavaScript value, which JSON.stringify
// writes and PostgreSQL keeps as jsonb, so a payload that is not JSON
// cannot be a pg-boss job's data.
func (b *boss) stored(payload []byte) ([]byte, bool) {
	b.tb.Helper()
	b.send(map[string]any{"cmd": "stored", "payload": string(payload)})
	e := b.await("stored", "")
	if e.Error != "" {
		return nil, false
	}
	var text string
	if err := json.Unmarshal(e.Data, &text); err != nil {
		b.tb.Fatalf("stored: %v", err)
	}
	var kept []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, text).Scan(&kept); err != nil {
		b.tb.Fatal(err)
	}
	return kept, true
}
