package e2e_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// listedLetter is one element of `dlq list -o json`, with the fields scripts
// rely on.
type listedLetter struct {
	ID             int64      `json:"id"`
	MessageID      string     `json:"message_id"`
	ReservationID  string     `json:"reservation_id"`
	IdempotencyKey string     `json:"idempotency_key"`
	Category       string     `json:"reason_category"`
	ErrorClass     string     `json:"error_class"`
	Attempts       int        `json:"attempts"`
	Status         string     `json:"status"`
	SourceQueue    string     `json:"source_queue"`
	DeadLetteredAt time.Time  `json:"dead_lettered_at"`
	DueAt          *time.Time `json:"due_at"`
}

var listJSONFields = []string{"id", "message_id", "reservation_id", "idempotency_key", "reason_category",
	"error_class", "attempts", "status", "source_queue", "dead_lettered_at", "due_at"}

// TestEndToEnd walks the operator's path on a fresh database: migrate,
// capture a DLQ that holds both kinds of dead letter, triage it with every
// read command and output format, and hit each documented failure exit code.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	const actor = "e2e-oncall"
	db := pgtest.NewEmpty(t)
	c := newCLI(db.URL, actor)
	// audited counts the audit rows each action should have left.
	audited := map[string]int{}

	t.Run("unmigrated database", func(t *testing.T) {
		res := c.exits(t, 6, "dlq", "summary")
		if !strings.Contains(res.stderr, "expiryctl migrate") {
			t.Errorf("the schema error should say to run `expiryctl migrate`: %s", res)
		}
	})

	t.Run("migrate", func(t *testing.T) {
		// Flags must win over the environment, which here points nowhere.
		viaFlags := newCLI("postgres://nobody@127.0.0.1:1/wrong?sslmode=disable", "wrong-actor")
		first := viaFlags.ok(t, "migrate", "--database-url", db.URL, "--actor", actor)
		where := regexp.QuoteMeta("database " + db.Name + " on ")
		if !regexp.MustCompile(`applied \d+ migrations to ` + where + `127\.0\.0\.1:\d+ \(as \w+\); schema expiryctl is at version \d+`).MatchString(first.stderr) {
			t.Errorf("first migrate should say what it applied, and to which database: %s", first)
		}
		second := viaFlags.ok(t, "migrate", "--database-url", db.URL, "--actor", actor)
		if !strings.Contains(second.stderr, "of database "+db.Name+" on ") || !strings.Contains(second.stderr, "is up to date") {
			t.Errorf("second migrate should say the schema is up to date: %s", second)
		}
		audited["schema.migrate"] += 2
	})
	if t.Failed() {
		t.FailNow()
	}

	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	// RabbitMQ dead-letters from this queue into the DLQ by itself; a
	// length of 2 makes the third message overflow.
	work := r.queue(t, ".work", amqp.Table{
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": dlq,
		"x-max-length":              int32(2),
	})

	type expected struct {
		job        job
		category   string
		errorClass string
		attempts   int
	}
	want := []expected{
		{newJob(1), "transient-exhausted", "db_timeout", 3},
		{newJob(2), "validation", "validation", 3},
		{newJob(3), "not-found", "not_found", 3},
		{newJob(4), "conflict", "version_conflict", 3},
		{newJob(10), "unknown", "", 1},
		{newJob(11), "broker-expired", "", 1},
		{newJob(12), "broker-limit", "", 1},
	}
	garbled := rawLetter("garbled", []byte("<html>502 Bad Gateway</html>"), amqp.Table{"x-error-class": "db_timeout"})

	t.Run("seed worker letters", func(t *testing.T) {
		first := newJob(1).workerLetter("db_timeout", "pq: canceling statement due to statement timeout", 3)
		r.publish(t, dlq,
			first,
			newJob(2).workerLetter("validation", "hold_until is in the past", 3),
			newJob(3).workerLetter("not_found", "reservation r-3 not found", 3),
			newJob(4).workerLetter("version_conflict", "expected version 3, found 4", 3),
			garbled,
			// A worker that crashed between its publish and its ack leaves
			// the same letter twice.
			first,
		)
	})

	t.Run("seed broker letters", func(t *testing.T) {
		r.publish(t, work, newJob(10).message())
		ch, err := r.conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		var d amqp.Delivery
		waitFor(t, 10*time.Second, "a message to reject", func() bool {
			var ok bool
			d, ok, err = ch.Get(work, false)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if err := d.Nack(false, false); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the rejected letter", func() bool { ready, _ := r.inspect(t, dlq); return ready == 7 })

		expiring := newJob(11).message()
		expiring.Expiration = "20"
		r.publish(t, work, expiring)
		waitFor(t, 10*time.Second, "the expired letter", func() bool { ready, _ := r.inspect(t, dlq); return ready == 8 })

		r.publish(t, work, newJob(12).message(), newJob(13).message(), newJob(14).message())
		waitFor(t, 10*time.Second, "the maxlen letter", func() bool { ready, _ := r.inspect(t, dlq); return ready == 9 })
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("ingest", func(t *testing.T) {
		res := c.ok(t, "dlq", "ingest", "--queue", dlq)
		audited["dlq.ingest"]++
		if !strings.Contains(res.stderr, fmt.Sprintf("ingested 9 letters from %s: 8 stored, 1 duplicate", dlq)) {
			t.Errorf("ingest should sum up 9 letters, 8 stored and 1 duplicate: %s", res)
		}
		if ready := r.settled(t, dlq); ready != 0 {
			t.Errorf("%d letters left in %s after ingest, want 0", ready, dlq)
		}
	})

	t.Run("summary", func(t *testing.T) {
		res := c.ok(t, "dlq", "summary", "-o", "json")
		audited["dlq.summary"]++
		var summary struct {
			Categories []struct {
				Category string     `json:"reason_category"`
				Count    int        `json:"count"`
				Total    int        `json:"total"`
				Oldest   *time.Time `json:"oldest_dead_lettered_at"`
				Queues   []string   `json:"queues"`
			} `json:"categories"`
		}
		decodeJSON(t, res, &summary)
		got := map[string]int{}
		for _, s := range summary.Categories {
			got[s.Category] = s.Count
			if s.Total != s.Count || s.Oldest == nil || !slices.Equal(s.Queues, []string{dlq}) {
				t.Errorf("summary line %+v: want total = count, an oldest time and queues [%s]", s, dlq)
			}
		}
		wantCounts := map[string]int{"malformed": 1}
		for _, w := range want {
			wantCounts[w.category]++
		}
		if !maps.Equal(got, wantCounts) {
			t.Errorf("summary counts = %v, want %v", got, wantCounts)
		}

		table := c.ok(t, "dlq", "summary")
		audited["dlq.summary"]++
		if !strings.Contains(table.stdout, "\nCATEGORY\tWAITING\tOVERDUE\t") || !regexp.MustCompile(`\ntransient-exhausted\t1\t[01]\t20`).MatchString(table.stdout) {
			t.Errorf("piped summary should be tab-separated with a header: %s", table)
		}
	})

	var listed []listedLetter
	t.Run("list json", func(t *testing.T) {
		res := c.ok(t, "dlq", "list", "-o", "json")
		audited["dlq.list"]++
		var raw []map[string]json.RawMessage
		decodeJSON(t, res, &raw)
		for _, obj := range raw {
			for _, f := range listJSONFields {
				if _, ok := obj[f]; !ok {
					t.Errorf("dlq list -o json: element %s lacks %q", obj["id"], f)
				}
			}
		}
		decodeJSON(t, res, &listed)
		if len(listed) != 8 {
			t.Fatalf("dlq list -o json returned %d letters, want 8", len(listed))
		}
		byReservation := map[string]listedLetter{}
		for _, l := range listed {
			byReservation[l.ReservationID] = l
			if l.Status != "dead" || l.SourceQueue != dlq || l.ID <= 0 {
				t.Errorf("letter %+v: want status dead, source queue %s and an id", l, dlq)
			}
		}
		for _, w := range want {
			l, ok := byReservation[w.job.reservation()]
			if !ok {
				t.Errorf("no letter for %s", w.job.reservation())
				continue
			}
			if l.MessageID != w.job.idempotencyKey() || l.IdempotencyKey != w.job.idempotencyKey() ||
				l.Category != w.category || l.ErrorClass != w.errorClass || l.Attempts != w.attempts {
				t.Errorf("%s listed as %+v, want category %s, error class %q, %d attempts, ids %s",
					w.job.reservation(), l, w.category, w.errorClass, w.attempts, w.job.idempotencyKey())
			}
			if l.DueAt == nil || !l.DueAt.Equal(w.job.holdUntil()) {
				t.Errorf("%s due_at = %v, want hold_until %v", w.job.reservation(), l.DueAt, w.job.holdUntil())
			}
			// A worker letter died at its last attempt; a broker letter when
			// RabbitMQ dead-lettered it, which was moments ago.
			if w.errorClass != "" && !l.DeadLetteredAt.Equal(w.job.attemptAt(w.attempts-1)) {
				t.Errorf("%s dead_lettered_at = %v, want its last attempt %v", w.job.reservation(), l.DeadLetteredAt, w.job.attemptAt(w.attempts-1))
			}
			if w.errorClass == "" && time.Since(l.DeadLetteredAt) > 10*time.Minute {
				t.Errorf("%s dead_lettered_at = %v, want the time RabbitMQ dead-lettered it", w.job.reservation(), l.DeadLetteredAt)
			}
		}
		if l := byReservation[""]; l.Category != "malformed" || l.MessageID != garbled.MessageId {
			t.Errorf("the garbled letter is listed as %+v, want category malformed", l)
		}
		for i := 1; i < len(listed); i++ {
			if listed[i].DeadLetteredAt.After(listed[i-1].DeadLetteredAt) {
				t.Errorf("dlq list is not newest first at %d: %v after %v", i, listed[i].DeadLetteredAt, listed[i-1].DeadLetteredAt)
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("list pages", func(t *testing.T) {
		var ids []int64
		args := []string{"dlq", "list", "--limit", "2"}
		for page := 1; ; page++ {
			if page > 10 {
				t.Fatalf("paging does not end: ids so far %v", ids)
			}
			res := c.ok(t, args...)
			audited["dlq.list"]++
			pageIDs := tableIDs(t, res)
			if len(pageIDs) == 0 || len(pageIDs) > 2 {
				t.Fatalf("page %d has %d letters, want 1 or 2: %s", page, len(pageIDs), res)
			}
			ids = append(ids, pageIDs...)
			m := regexp.MustCompile(`next page: --after (\S+)`).FindStringSubmatch(res.stderr)
			if m == nil {
				break
			}
			args = []string{"dlq", "list", "--limit", "2", "--after", m[1]}
		}
		var wantIDs []int64
		for _, l := range listed {
			wantIDs = append(wantIDs, l.ID)
		}
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("pages gave ids %v, want each letter once in list order %v", ids, wantIDs)
		}
	})

	t.Run("list csv", func(t *testing.T) {
		res := c.ok(t, "dlq", "list", "-o", "csv")
		audited["dlq.list"]++
		records, err := csv.NewReader(strings.NewReader(res.stdout)).ReadAll()
		if err != nil {
			t.Fatalf("dlq list -o csv is not CSV: %v\n%s", err, res)
		}
		if len(records) != 9 {
			t.Fatalf("dlq list -o csv has %d records, want a header and 8 letters: %s", len(records), res)
		}
		if !slices.Equal(records[0][:len(listJSONFields)], listJSONFields) {
			t.Errorf("csv header = %v, want it to start with %v", records[0], listJSONFields)
		}
		for i, rec := range records[1:] {
			l := listed[i]
			if rec[0] != strconv.FormatInt(l.ID, 10) || rec[2] != l.ReservationID || rec[4] != l.Category {
				t.Errorf("csv record %v does not match the JSON listing %+v", rec, l)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		worker := findListed(t, listed, newJob(1).reservation())
		res := c.ok(t, "dlq", "show", strconv.FormatInt(worker.ID, 10))
		audited["dlq.show"]++
		for _, s := range []string{
			fmt.Sprintf("Dead letter %d — transient-exhausted, dead", worker.ID),
			"expire:r-1:v3",
			"db_timeout",
			"pq: canceling statement due to statement timeout",
			`exchange "reservations", routing key "reservation.expire"`,
			"attempt 3: pq: canceling statement",
		} {
			if !strings.Contains(res.stdout, s) {
				t.Errorf("dlq show %d should contain %q: %s", worker.ID, s, res)
			}
		}

		res = c.ok(t, "dlq", "show", strconv.FormatInt(worker.ID, 10), "-o", "json")
		audited["dlq.show"]++
		var detail struct {
			listedLetter
			OriginalExchange string            `json:"original_exchange"`
			Payload          []byte            `json:"payload"`
			AttemptHistory   []json.RawMessage `json:"attempt_history"`
			Headers          map[string]any    `json:"headers"`
		}
		decodeJSON(t, res, &detail)
		if !bytes.Equal(detail.Payload, newJob(1).body()) || len(detail.AttemptHistory) != 3 ||
			detail.OriginalExchange != "reservations" || detail.Headers["x-error-class"] != "db_timeout" {
			t.Errorf("dlq show -o json = %+v, want the exact payload, 3 attempts and the headers", detail)
		}

		rejected := findListed(t, listed, newJob(10).reservation())
		res = c.ok(t, "dlq", "show", strconv.FormatInt(rejected.ID, 10))
		audited["dlq.show"]++
		for _, s := range []string{"reason=rejected count=1 queue=" + work, fmt.Sprintf("queue %q (from x-death", work)} {
			if !strings.Contains(res.stdout, s) {
				t.Errorf("dlq show of the rejected letter should contain %q: %s", s, res)
			}
		}
	})

	t.Run("not found", func(t *testing.T) {
		res := c.exits(t, 3, "dlq", "show", "999999")
		audited["dlq.show"]++
		if !strings.Contains(res.stderr, "999999") {
			t.Errorf("not found should name the id: %s", res)
		}
	})

	t.Run("bad flag", func(t *testing.T) {
		res := c.exits(t, 2, "dlq", "list", "--reason", "nope")
		for _, cat := range []string{"transient-exhausted", "validation", "not-found", "conflict", "malformed", "broker-expired", "broker-limit", "unknown"} {
			if !strings.Contains(res.stderr, cat) {
				t.Errorf("the usage error should list category %q: %s", cat, res)
			}
		}
	})

	t.Run("unreachable servers", func(t *testing.T) {
		cases := []struct {
			name string
			args []string
		}{
			{"postgres", []string{"dlq", "list", "--database-url", "postgres://u:hunter2@127.0.0.1:1/x"}},
			{"rabbitmq", []string{"dlq", "ingest", "--queue", dlq, "--amqp-url", "amqp://u:hunter2@127.0.0.1:1/"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := c.exits(t, 5, tc.args...)
				if !strings.Contains(res.stderr, "127.0.0.1:1") {
					t.Errorf("the error should name the address 127.0.0.1:1: %s", res)
				}
				if strings.Contains(res.stdout+res.stderr, "hunter2") {
					t.Errorf("the password was printed: %s", res)
				}
			})
		}
	})

	t.Run("audit trail", func(t *testing.T) {
		got := map[string]int{}
		rs, err := db.Pool.Query(withTimeout(t), `SELECT action, count(*) FROM expiryctl.audit_log
			WHERE actor = $1 AND db_role = 'postgres' GROUP BY action`, actor)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var action string
			var n int
			if err := rs.Scan(&action, &n); err != nil {
				t.Fatal(err)
			}
			got[action] = n
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		for action, n := range audited {
			if got[action] != n {
				t.Errorf("audit rows for %s = %d, want %d (one per command run)", action, got[action], n)
			}
		}
		if got["dlq.ingest.batch"] < 1 {
			t.Errorf("no dlq.ingest.batch audit row")
		}
		// The batch rows together account for every letter received.
		letters := count(t, db.Pool, `SELECT coalesce(sum((details->>'letters')::int), 0) FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`)
		stored := count(t, db.Pool, `SELECT coalesce(sum((details->>'stored')::int), 0) FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`)
		if letters != 9 || stored != 8 {
			t.Errorf("dlq.ingest.batch rows account for %d letters and %d stored, want 9 and 8", letters, stored)
		}
		if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE actor <> $1`, actor); n != 0 {
			t.Errorf("%d audit rows name another actor than %s", n, actor)
		}
		if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.show' AND outcome = 'refused' AND target = 'dead_letter:999999'`); n != 1 {
			t.Errorf("the show of a missing letter should be audited as refused once, found %d", n)
		}
	})
}

// decodeJSON decodes a command's stdout, failing with the whole result.
func decodeJSON(t testing.TB, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not the expected JSON (%v): %s", err, r)
	}
}

// tableIDs reads the ID column of a piped `dlq list` table: a header line,
// then one tab-separated line per letter.
func tableIDs(t testing.TB, r result) []int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "ID\t") {
		t.Fatalf("want a header line starting with ID: %s", r)
	}
	var ids []int64
	for _, line := range lines[1:] {
		id, err := strconv.ParseInt(strings.SplitN(line, "\t", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("line %q does not start with an id: %s", line, r)
		}
		ids = append(ids, id)
	}
	return ids
}

func findListed(t testing.TB, listed []listedLetter, reservation string) listedLetter {
	t.Helper()
	for _, l := range listed {
		if l.ReservationID == reservation {
			return l
		}
	}
	t.Fatalf("no letter for %s in %+v", reservation, listed)
	return listedLetter{}
}
