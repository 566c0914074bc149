package e2e_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// outboxMapping maps the team's outbox of expiry jobs: a text status, a
// json payload, an attempt counter, and a column for expiryctl's marks.
var outboxMapping = jobtable.Mapping{
	Table: "jobs.expiry_outbox",
	Columns: jobtable.Columns{
		ID: "job_id", Payload: "body", Attempts: "tries", LastError: "error_text",
		Status: "state", DueAt: "next_run_at", FailedAt: "gave_up_at", Marks: "expiryctl",
		Native: []string{"reservation_id", "idempotency_key"},
	},
	FailedStates: []string{"gave_up"},
	ReplayState:  "queued",
}

// TestJobTableIncident runs an incident of a team's own jobs table through
// the CLI, as people. The table can be neither captured nor replayed
// until an admin has proposed its mapping and a second admin approved it
// (rule job-table-mapping); an operator cannot propose one. Capture then
// reads the failed rows as a login granted only what the mapping needs,
// twice, storing each once and changing nothing; alice's approved replay
// puts each row back in the state the mapping names, with the replay's
// marks, and touches no other row.
func TestJobTableIncident(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t)
	team := pgtest.NewEmpty(t)
	for _, sql := range []string{
		`CREATE SCHEMA jobs`,
		`CREATE TABLE jobs.expiry_outbox (job_id bigserial PRIMARY KEY, reservation_id text NOT NULL, idempotency_key text NOT NULL,
			body json NOT NULL, state text NOT NULL DEFAULT 'queued', tries integer NOT NULL DEFAULT 0, error_text text,
			next_run_at timestamptz NOT NULL DEFAULT now(), gave_up_at timestamptz, expiryctl jsonb)`,
	} {
		if _, err := team.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	login := team.Login(t, "jobs")
	t.Cleanup(func() { _, _ = team.Pool.Exec(withTimeout(t), "DROP OWNED BY "+pgx.Identifier{login.Name}.Sanitize()) })
	grants, err := jobtable.GrantSQL(outboxMapping, login.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if _, err := team.Pool.Exec(ctx, g); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	const n = 3
	for i := range n + 1 {
		state, gaveUp := "gave_up", any(time.Now().Add(-time.Minute))
		if i == n {
			state, gaveUp = "queued", nil
		}
		body := fmt.Sprintf(`{"reservation_id": "r-outbox-%d", "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "expire:r-outbox-%d:v1"}`, i, i)
		if _, err := team.Pool.Exec(ctx, `INSERT INTO jobs.expiry_outbox (reservation_id, idempotency_key, body, state, tries, error_text, gave_up_at)
			VALUES ($1, $2, $3, $4, 5, 'ERROR: deadlock detected (SQLSTATE 40P01)', $5)`,
			fmt.Sprintf("r-outbox-%d", i), fmt.Sprintf("expire:r-outbox-%d:v1", i), body, state, gaveUp); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() string {
		var d string
		if err := team.Pool.QueryRow(ctx, `SELECT md5(string_agg(o::text, ',' ORDER BY job_id)) FROM jobs.expiry_outbox o`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()

	db := pgtest.New(t)
	shortCanary(t, db)
	// The table's connection is the operator's, by name: capture and
	// replay reach it as the login granted only what the mapping names.
	config := configFile(t, map[string]connection{"jobs": {system: "jobtable",
		url: fmt.Sprintf("postgres://%s@127.0.0.1:5432/%s?sslmode=disable", login.Name, team.Name)}})
	dana := newCLI(db.Login(t, "dana", "expiryctl_admin").URL, "")
	erin := newCLI(db.Login(t, "erin", "expiryctl_admin").URL, "")
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "").withConfig(config)
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "").withConfig(config)
	bob := newCLI(db.Login(t, "bob", "expiryctl_approver").URL, "").withConfig(config)

	name := "jobtable://jobs/jobs.expiry_outbox"
	queue := name
	refused := ingester.exits(t, 4, "dlq", "ingest", "--queue", queue)
	if !strings.Contains(refused.stderr, "job-table-mapping") {
		t.Errorf("a capture of a table with no approved mapping: %s", refused)
	}

	mapping, err := json.Marshal(map[string]any{name: outboxMapping})
	if err != nil {
		t.Fatal(err)
	}
	alice.exits(t, 4, "policy", "set", "job_tables="+string(mapping), "--why", "INC-5120")
	set := dana.ok(t, "policy", "set", "job_tables="+string(mapping), "--why", "INC-5120: the outbox")
	change := regexp.MustCompile("`expiryctl policy approve ([0-9]+)`").FindStringSubmatch(set.stderr)
	if change == nil {
		t.Fatalf("dana's mapping is not a proposal: %s", set)
	}
	ingester.exits(t, 4, "dlq", "ingest", "--queue", queue)
	dana.exits(t, 4, "policy", "approve", change[1], "--why", "mine")
	erin.ok(t, "policy", "approve", change[1], "--why", "checked the columns")
	if shown := dana.ok(t, "policy", "show"); !strings.Contains(shown.stdout, name) {
		t.Errorf("policy show does not list the approved table:\n%s", shown.stdout)
	}

	res := ingester.ok(t, "dlq", "ingest", "--queue", queue)
	if strings.Contains(res.stderr, "logs in as") {
		t.Errorf("a capture through the login granted only the mapping's columns is warned of: %s", res)
	}
	if want := fmt.Sprintf("ingested %d letters", n); !strings.Contains(res.stderr, want) {
		t.Errorf("ingest should say %q: %s", want, res)
	}
	if strings.Contains(res.stderr, login.Name+"@") {
		t.Errorf("ingest printed the login's reference: %s", res)
	}
	ingester.ok(t, "dlq", "ingest", "--queue", queue)
	if after := digest(); after != before {
		t.Error("capture changed the team's table")
	}
	var listed []listedLetter
	decodeJSON(t, alice.ok(t, "dlq", "list", "-o", "json", "--limit", "0"), &listed)
	if len(listed) != n {
		t.Fatalf("%d letters archived for %d failed rows", len(listed), n)
	}
	var ids []string
	for _, l := range listed {
		var shown struct {
			System      string            `json:"system"`
			SourceQueue string            `json:"source_queue"`
			Category    string            `json:"reason_category"`
			Attempts    int               `json:"attempts"`
			Native      map[string]string `json:"native"`
		}
		decodeJSON(t, alice.ok(t, "dlq", "show", strconv.FormatInt(l.ID, 10), "-o", "json"), &shown)
		if shown.System != "jobtable" || shown.SourceQueue != name || shown.Attempts != 5 || shown.Category != "transient-exhausted" ||
			!strings.HasPrefix(shown.Native["reservation_id"], "r-outbox-") {
			t.Errorf("letter %d: %+v", l.ID, shown)
		}
		ids = append(ids, "--id", strconv.FormatInt(l.ID, 10))
	}

	var req struct {
		ID int64 `json:"id"`
	}
	decodeJSON(t, alice.ok(t, append(append([]string{"replay", "request"}, ids...),
		"--same-handler-ok", "the poller shows no version: the fix is deployed", "--why", "INC-5120: the database deadlocked",
		"--canary", "0", "--unwatched", "the outbox poller is stopped for the test", "-o", "json")...), &req)
	id := strconv.FormatInt(req.ID, 10)
	bob.ok(t, "replay", "approve", id, "--why", "checked the cohort")
	var summary replaySummary
	decodeJSON(t, alice.ok(t, "replay", "run", id, "-o", "json"), &summary)
	if summary.Status != "completed" || summary.Confirmed != n {
		t.Errorf("replay run %d: %+v, want completed with %d confirmed", req.ID, summary, n)
	}
	rows, err := team.Pool.Query(ctx, `SELECT reservation_id, state, next_run_at <= now(), coalesce(expiryctl->>'x-replay-request', '')
		FROM jobs.expiry_outbox ORDER BY job_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var reservation, state, marked string
		var due bool
		if err := rows.Scan(&reservation, &state, &due, &marked); err != nil {
			t.Fatal(err)
		}
		switch {
		case reservation == fmt.Sprintf("r-outbox-%d", n) && marked != "":
			t.Errorf("%s, never failed, was marked by request %s", reservation, marked)
		case reservation != fmt.Sprintf("r-outbox-%d", n) && (state != "queued" || !due || marked != id):
			t.Errorf("%s after the replay: state %s, due %v, marked by request %q; want queued, due, marked by %s", reservation, state, due, marked, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
