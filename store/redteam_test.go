package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// The red team: people with their own logins, none a superuser or the
// owner, each in the groups docs/governance.md gives them, attacking the
// rules with raw SQL (psql) rather than through expiryctl.

type redTeam struct {
	db *pgtest.Database
	// owner is the schema's owner (not a superuser).
	owner *pgxpool.Pool
	// alice requests and runs; bob and carol approve; dave and erin are
	// admins; ivan captures; audrey audits. mallory is in operator and
	// approver both (one person holding two hats).
	alice, bob, carol, dave, erin, ivan, audrey, mallory *pgtest.Login
	letters                                              []int64
}

func setupRedTeam(t *testing.T) *redTeam {
	t.Helper()
	db := pgtest.New(t)
	rt := &redTeam{
		db:      db,
		owner:   pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner)),
		alice:   db.Login(t, "alice", "expiryctl_operator"),
		bob:     db.Login(t, "bob", "expiryctl_approver"),
		carol:   db.Login(t, "carol", "expiryctl_approver"),
		dave:    db.Login(t, "dave", "expiryctl_admin"),
		erin:    db.Login(t, "erin", "expiryctl_admin"),
		ivan:    db.Login(t, "ivan", "expiryctl_ingester"),
		audrey:  db.Login(t, "audrey", "expiryctl_auditor"),
		mallory: db.Login(t, "mallory", "expiryctl_operator", "expiryctl_approver"),
	}
	ctx := context.Background()
	letters := make([]deadletter.Letter, 6)
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":1,"idempotency_key":"expire:r-%d:v1"}`, i, i)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-%d:v1", i),
			ReservationID: fmt.Sprintf("r-%d", i), IdempotencyKey: fmt.Sprintf("expire:r-%d:v1", i), SourceQueue: "q.dlq",
			OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire", Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, i, 0, 0, time.UTC)}
	}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", letters); err != nil {
		t.Fatalf("the ingester cannot capture: %v", err)
	}
	rows, err := rt.owner.Query(ctx, `SELECT id FROM expiryctl.dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if rt.letters, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	// The owner bootstraps the policy: it applies at once.
	res, err := replay.SetPolicy(ctx, rt.owner, "", map[string]any{"approvers": []string{rt.bob.Name, rt.carol.Name, rt.mallory.Name}})
	if err != nil || !res.Applied {
		t.Fatalf("owner bootstrap: %+v, %v", res, err)
	}
	return rt
}

// request has alice request a replay of ids and returns it.
func (rt *redTeam) request(t *testing.T, ids ...int64) replay.Request {
	t.Helper()
	created, err := (&replay.Service{Pool: rt.alice.Pool}).Create(context.Background(), replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: ids}, Why: "INC-1", Canary: new(int),
		UnwatchedWhy: "the red team's letters come from no queue of a broker"})
	if err != nil {
		t.Fatal(err)
	}
	return created.Request
}

func (rt *redTeam) approve(t *testing.T, who *pgtest.Login, req replay.Request) {
	t.Helper()
	if _, err := (&replay.Service{Pool: who.Pool}).Approve(context.Background(), req.ID,
		replay.ReviewOptions{Why: "ok", CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
}

// refused runs sql as who and asserts the database refuses it: a governance
// rule (SQLSTATE EG001, with rule when one is named) or a missing privilege
// (42501, when rule is "privilege").
func refused(t *testing.T, who *pgxpool.Pool, rule, sql string, args ...any) {
	t.Helper()
	_, err := who.Exec(context.Background(), sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Errorf("%s: the database accepted it (err %v), want refused by %s", sql, err, rule)
		return
	}
	switch {
	case rule == "privilege" && pgErr.Code == "42501":
	case rule != "privilege" && pgErr.Code == store.RefusalSQLState && pgErr.Detail == "rule: "+rule:
	default:
		t.Errorf("%s: %s (%s, %s), want refused by %s", sql, pgErr.Message, pgErr.Code, pgErr.Detail, rule)
	}
}

func TestNoGroupWritesATableDirectly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	// The privilege functions read the ACLs of every table, which name
	// logins that other tests, on the same cluster, make and drop as this
	// runs: a login dropped under the read is "does not exist", and the
	// read is taken again.
	type grant struct{ Table, Group, Priv string }
	var grants []grant
	for attempt := 1; ; attempt++ {
		rows, err := db.Pool.Query(ctx, `SELECT c.relname, g.rolname, p.priv
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN (SELECT rolname FROM pg_roles WHERE rolname = ANY ($1)) g
		CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
		WHERE n.nspname = 'expiryctl' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
		  AND (has_table_privilege(g.rolname, c.oid, p.priv)
		       OR (p.priv IN ('INSERT', 'UPDATE', 'REFERENCES') AND has_any_column_privilege(g.rolname, c.oid, p.priv)))
		UNION ALL
		SELECT c.relname, g.rolname, 'USAGE/UPDATE'
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN (SELECT rolname FROM pg_roles WHERE rolname = ANY ($1)) g
		WHERE n.nspname = 'expiryctl' AND c.relkind = 'S' AND has_sequence_privilege(g.rolname, c.oid, 'USAGE,UPDATE')
		UNION ALL
		SELECT 'schema', g.rolname, 'CREATE'
		FROM (SELECT rolname FROM pg_roles WHERE rolname = ANY ($1)) g
		WHERE has_schema_privilege(g.rolname, 'expiryctl', 'CREATE')`, pgtest.AllGroups)
		if err == nil {
			grants, err = pgx.CollectRows(rows, pgx.RowToStructByPos[grant])
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42704" && attempt < 5 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	for _, g := range grants {
		t.Errorf("%s may %s %s directly", g.Group, g.Priv, g.Table)
	}
	var tables int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'expiryctl'`).Scan(&tables); err != nil || tables < 8 {
		t.Fatalf("found %d tables (%v): the check looked at nothing", tables, err)
	}
	// Every function that runs as the owner pins its search_path, and
	// none is PUBLIC's to execute.
	rows, err := db.Pool.Query(ctx, `SELECT p.proname, p.prosecdef AND NOT coalesce(p.proconfig::text LIKE '%search_path=%', false),
			has_function_privilege('public', p.oid, 'EXECUTE')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'expiryctl'`)
	if err != nil {
		t.Fatal(err)
	}
	type fn struct {
		Name               string
		Unpinned, ByPublic bool
	}
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fn])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if f.Unpinned {
			t.Errorf("function %s is SECURITY DEFINER with no pinned search_path", f.Name)
		}
		if f.ByPublic {
			t.Errorf("function %s is executable by PUBLIC", f.Name)
		}
	}
}

func TestRedTeamPolicy(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	// alice turns identity_mode to declared, approves her own request as
	// "bob", and turns it back: she cannot even touch the row.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.policy SET identity_mode = 'declared'`)
	refused(t, rt.alice.Pool, "privilege", `SELECT expiryctl.policy_set('', '{"identity_mode": "declared"}', '')`)
	// An admin alone cannot change it either: her change is a proposal.
	res, err := replay.SetPolicy(ctx, rt.dave.Pool, "", map[string]any{"max_rate": 5000})
	if err != nil || res.Applied || res.ChangeID == 0 {
		t.Fatalf("an admin's change applied at once: %+v, %v", res, err)
	}
	if p, _ := replay.LoadPolicy(ctx, rt.dave.Pool); p.MaxRate == 5000 {
		t.Fatal("a proposal changed the policy")
	}
	// ... which she cannot approve herself, whatever label she gives.
	refused(t, rt.dave.Pool, "four-eyes", `SELECT expiryctl.policy_review('erin', $1, 'approve', 'me again')`, res.ChangeID)
	refused(t, rt.dave.Pool, "privilege", `UPDATE expiryctl.policy_changes SET status = 'applied' WHERE id = $1`, res.ChangeID)
	refused(t, rt.alice.Pool, "privilege", `SELECT expiryctl.policy_review('', $1, 'approve', '')`, res.ChangeID)
	if _, err := replay.ReviewPolicyChange(ctx, rt.erin.Pool, "", res.ChangeID, true, "agreed"); err != nil {
		t.Fatalf("a second admin cannot approve: %v", err)
	}
	if p, _ := replay.LoadPolicy(ctx, rt.dave.Pool); p.MaxRate != 5000 {
		t.Fatalf("the approved change did not apply: max_rate %v", p.MaxRate)
	}
	// Single use: approving the same change again is refused.
	refused(t, rt.dave.Pool, "single-review", `SELECT expiryctl.policy_review('', $1, 'approve', '')`, res.ChangeID)
	// Out-of-range values are refused when proposed, not only when applied.
	_, err = replay.SetPolicy(ctx, rt.dave.Pool, "", map[string]any{"stop_failure_ratio": 7})
	if !errors.As(err, new(*replay.Refusal)) {
		t.Errorf("a ratio of 7 was proposed: %v", err)
	}
}

func TestRedTeamApproval(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	req := rt.request(t, rt.letters[0])
	// alice is no approver: neither the function nor the table is hers.
	refused(t, rt.alice.Pool, "privilege", `SELECT expiryctl.replay_review('bob', $1, 'approve', '', false, $2)`, req.ID, req.CohortHash)
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob' WHERE id = $1`, req.ID)
	// mallory holds both hats: she requests, then approves her own request
	// under another name. Four-eyes compares logins.
	created, err := (&replay.Service{Pool: rt.mallory.Pool, Actor: "mallory"}).Create(context.Background(), replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: rt.letters[1:2]}, Why: "INC-2"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&replay.Service{Pool: rt.mallory.Pool, Actor: "carol"}).Approve(context.Background(), created.Request.ID,
		replay.ReviewOptions{CohortHash: created.Request.CohortHash})
	var refusal *replay.Refusal
	if !errors.As(err, &refusal) || refusal.Rule != "four-eyes" {
		t.Errorf("mallory approved her own request as carol: %v", err)
	}
	// bob approves a hash he was not shown: refused.
	refused(t, rt.bob.Pool, "cohort-hash", `SELECT expiryctl.replay_review('', $1, 'approve', '', false, '\xdeadbeef')`, req.ID)
	refused(t, rt.bob.Pool, "cohort-hash", `SELECT expiryctl.replay_review('', $1, 'approve', '', false, NULL)`, req.ID)
	rt.approve(t, rt.bob, req)
	// Approved is not pending again, for anyone in a group.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_requests SET status = 'pending' WHERE id = $1`, req.ID)
	refused(t, rt.bob.Pool, "single-review", `SELECT expiryctl.replay_review('', $1, 'approve', '', false, $2)`, req.ID, req.CohortHash)
	// Nor can the owner move it back through the table: the guard refuses.
	refused(t, rt.owner, "run-transition", `UPDATE expiryctl.replay_requests SET status = 'pending' WHERE id = $1`, req.ID)
}

func TestRedTeamCohort(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0])
	rt.approve(t, rt.bob, req)
	// Grow the approved cohort from 1 to 3.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_requests SET created_xid = pg_current_xact_id() WHERE id = $1`, req.ID)
	refused(t, rt.alice.Pool, "privilege", `INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, ordinal, payload_sha256)
		SELECT $1, id, 10 + id, payload_sha256 FROM expiryctl.dead_letters WHERE id = ANY ($2)`, req.ID, rt.letters[1:3])
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET created_xid = pg_current_xact_id() WHERE id = $1`, req.ID)
	refused(t, rt.owner, "cohort-frozen", `INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, ordinal, payload_sha256)
		SELECT $1, id, 10 + id, payload_sha256 FROM expiryctl.dead_letters WHERE id = $2`, req.ID, rt.letters[1])
	// Edit a payload after approval, with or without its hash column.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.dead_letters SET payload = '\x7b7d' WHERE id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letters SET payload = '\x7b7d' WHERE id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letters SET payload = '\x7b7d', payload_sha256 = sha256('\x7b7d') WHERE id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letters SET headers = '{"x": 1}' WHERE id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `DELETE FROM expiryctl.dead_letters WHERE id = $1`, rt.letters[5])
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letters SET attempts = 1 WHERE id = $1`, rt.letters[0])
	// A redaction that moves the letter to another category on the way.
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now(),
		reason_category = 'validation' WHERE id = $1`, rt.letters[5])
	// Take the approved letter out of its request, or hide what became of
	// a letter, through its state row.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.dead_letter_states SET status = 'dead' WHERE dead_letter_id = $1`, rt.letters[0])
	refused(t, rt.alice.Pool, "privilege", `DELETE FROM expiryctl.dead_letter_states WHERE dead_letter_id = $1`, rt.letters[5])
	refused(t, rt.alice.Pool, "privilege", `INSERT INTO expiryctl.dead_letter_states (dead_letter_id, reason_category, source_queue,
		attempts, dead_lettered_at) VALUES (999999, 'validation', 'q', 1, now())`)
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letter_states SET reason_category = 'validation' WHERE dead_letter_id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `UPDATE expiryctl.dead_letter_states SET due_at = now() + interval '1 day' WHERE dead_letter_id = $1`, rt.letters[0])
	refused(t, rt.owner, "letter-immutable", `DELETE FROM expiryctl.dead_letter_states WHERE dead_letter_id = $1`, rt.letters[5])
	if _, err := rt.owner.Exec(ctx, `TRUNCATE expiryctl.dead_letter_states`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("TRUNCATE of the letters' states by their owner: %v, want refused as append-only", err)
	}
	// A request whose item_count lies, with no expiry and no stop conditions.
	refused(t, rt.alice.Pool, "privilege", `INSERT INTO expiryctl.replay_requests (kind, item_count, cohort_hash, rate,
		stop_failure_ratio, stop_queue_depth, stop_redead_ratio, canary_window, why, requested_by, expires_at)
		VALUES ('replay', 1, '\x00', 1, 1, 2147483647, 1, '0', 'x', 'alice', '2099-01-01')`)
	// Two open requests for one letter.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_items SET open = false WHERE request_id = $1`, req.ID)
	refused(t, rt.owner, "item-states", `UPDATE expiryctl.replay_items SET open = false WHERE request_id = $1`, req.ID)
	_, err := (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: rt.letters[0:1]}, Why: "again"})
	if !errors.As(err, new(*replay.Refusal)) {
		t.Errorf("a letter joined a second open request: %v", err)
	}
	// A bigger --max than the policy allows, or more ids.
	_, err = (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{Max: 100000}, Why: "all"})
	var refusal *replay.Refusal
	if !errors.As(err, &refusal) || refusal.Rule != "max-cohort" {
		t.Errorf("--max past the policy: %v, want max-cohort", err)
	}
	// The server resolved the cohort: its count and hash are the stored
	// payloads', whatever a client might have sent.
	var count int
	var hashOK bool
	if err := rt.owner.QueryRow(ctx, `SELECT r.item_count,
			r.cohort_hash = (SELECT sha256(string_agg(int8send(d.id) || sha256(d.payload), ''::bytea ORDER BY i.ordinal))
			                 FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
			                 WHERE i.request_id = r.id)
		FROM expiryctl.replay_requests r WHERE r.id = $1`, req.ID).Scan(&count, &hashOK); err != nil {
		t.Fatal(err)
	}
	if count != 1 || !hashOK {
		t.Errorf("item_count %d, cohort hash matches the stored payloads: %v", count, hashOK)
	}
}

func TestRedTeamRun(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0], rt.letters[1])
	rt.approve(t, rt.bob, req)
	// Nobody holds the runner lock: the run functions refuse.
	refused(t, rt.alice.Pool, "single-runner", `SELECT * FROM expiryctl.replay_run_start('', $1)`, req.ID)
	refused(t, rt.alice.Pool, "approved-to-run", `SELECT expiryctl.replay_canary_record('', $1, true, '{}')`, req.ID)
	// alice takes the lock on one session and starts the run.
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'test')`, req.ID); err != nil {
		t.Fatal(err)
	}
	// Without the consumers it observed, the start is refused
	// (redteam_handler_test.go attacks that check); with them, it starts.
	refused(t, rt.alice.Pool, "handler-unverified", `SELECT * FROM expiryctl.replay_run_start('', $1)`, req.ID)
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT * FROM expiryctl.replay_run_start('', $1, $2)`, req.ID, freshConsumers); err != nil {
		t.Fatal(err)
	}
	// A confirm without a publish: items move only from publishing.
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_record($1, 0, 1, $2, '{}', '{}')`, req.ID, rt.letters[:1]); err == nil {
		t.Error("an item went from pending to confirmed")
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_record($1, 0, 1, $2, '{}', '{}')`, req.ID, rt.letters[:1]); err != nil {
		t.Fatal(err)
	}
	// A letter outside the cohort cannot be marked or confirmed.
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[4:5]); err == nil {
		t.Error("a letter outside the cohort was marked publishing")
	}
	// Reset a confirmed item to pending mid-run, to publish it twice.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_items SET state = 'pending' WHERE request_id = $1`, req.ID)
	refused(t, rt.owner, "item-states", `UPDATE expiryctl.replay_items SET state = 'pending' WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	refused(t, rt.owner, "item-states", `UPDATE expiryctl.replay_items SET state = 'publishing' WHERE request_id = $1 AND state = 'confirmed'`, req.ID)
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_run_interrupted('', $1, $2, '{}')`, req.ID, rt.letters[:1]); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := rt.owner.QueryRow(ctx, `SELECT state FROM expiryctl.replay_items WHERE request_id = $1 AND dead_letter_id = $2`,
		req.ID, rt.letters[0]).Scan(&state); err != nil || state != "confirmed" {
		t.Errorf("the confirmed item is %q (%v) after a release", state, err)
	}
	// Another operator's login, without the lock, cannot move the items.
	other := rt.db.Login(t, "oscar", "expiryctl_operator")
	refused(t, other.Pool, "single-runner", `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[1:2])
	refused(t, other.Pool, "single-runner", `SELECT expiryctl.replay_run_halt('', $1, 'x', '{}', '{}')`, req.ID)
	refused(t, other.Pool, "single-runner", `SELECT expiryctl.replay_canary_record('', $1, true, '{}')`, req.ID)
	refused(t, other.Pool, "single-runner", `SELECT expiryctl.replay_run_interrupted('', $1, '{}', '{}')`, req.ID)
	// Run events follow the request's state: no "acked after the cancel"
	// of a request never cancelled (it would mark letters replayed), no
	// interruption of a request no run is under.
	refused(t, rt.alice.Pool, "approved-to-run", `SELECT expiryctl.replay_run_acked_after_cancel('', $1, $2)`, req.ID, rt.letters[:2])
	pending := rt.request(t, rt.letters[2])
	refused(t, rt.alice.Pool, "approved-to-run", `SELECT expiryctl.replay_run_interrupted('', $1, '{}', '{}')`, pending.ID)
	refused(t, rt.alice.Pool, "approved-to-run", `SELECT expiryctl.replay_run_acked_after_cancel('', $1, $2)`, pending.ID, rt.letters[2:3])
	// The approver and the auditor run nothing.
	refused(t, rt.bob.Pool, "privilege", `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[1:2])
	refused(t, rt.audrey.Pool, "privilege", `SELECT * FROM expiryctl.replay_run_start('', $1)`, req.ID)
	// Stopping a run is the operators' call, not the approvers'.
	refused(t, rt.bob.Pool, "privilege", `SELECT expiryctl.replay_cancel('', $1, 'stop')`, req.ID)
}

func TestRedTeamAuditAndAccess(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	// Rows with any actor, straight into the table.
	refused(t, rt.alice.Pool, "privilege", `INSERT INTO expiryctl.audit_log (actor, action, target, outcome) VALUES ('bob', 'replay.approve', 'replay_request:1', 'ok')`)
	// Through the function, a governance action's "ok" row is the
	// database's to write.
	refused(t, rt.alice.Pool, "audit-reserved", `SELECT * FROM expiryctl.audit_append('bob', 'replay.approve', 'replay_request:1', '{}', 'ok')`)
	refused(t, rt.dave.Pool, "audit-reserved", `SELECT * FROM expiryctl.audit_append('', 'policy.set', 'policy', '{}', 'ok')`)
	// A resumed run trusts its canary rows: a forged pass would skip the
	// canary, a forged start shorten its wait.
	refused(t, rt.alice.Pool, "audit-reserved", `SELECT * FROM expiryctl.audit_append('', 'replay.canary.pass', 'replay_request:1', '{"approval": 1}', 'ok')`)
	refused(t, rt.alice.Pool, "audit-reserved", `SELECT * FROM expiryctl.audit_append('', 'replay.canary.start', 'replay_request:1', '{"approval": 1}', 'ok')`)
	// A governance action spelt otherwise, or an outcome spelt otherwise,
	// is refused too: a row an auditor could read as the real one.
	for _, forged := range []struct{ action, outcome, rule string }{
		{"replay.approve", "OK", "audit-reserved"},
		{"replay.approve ", "ok", "audit-reserved"},
		{"Replay.Approve", "ok", "audit-reserved"},
		{"replay. approve", "ok", "audit-reserved"},
		{"replay.approve\t", "ok", "audit-reserved"},
		{"access.grant ", "ok", "audit-reserved"},
		{"audit.checkpoint", "ok", "audit-reserved"},
		{"dlq.ingest.batch", "ok", "audit-reserved"},
		{"migrate.governance", "ok", "audit-reserved"},
		{"dlq.list", "OK", "audit-outcome"},
		{"dlq.list", "approved", "audit-outcome"},
		{"dlq.list ", "ok", "audit-action"},
		{"DLQ.LIST", "ok", "audit-action"},
		{"replay.approved", "ok", "audit-action"},
		{"", "ok", "audit-action"},
	} {
		refused(t, rt.alice.Pool, forged.rule, `SELECT * FROM expiryctl.audit_append('', $1, 'replay_request:1', '{}', $2)`, forged.action, forged.outcome)
	}
	// A refusal of a governance action is the client's to report.
	if _, err := rt.bob.Pool.Exec(ctx, `SELECT * FROM expiryctl.audit_append('', 'replay.approve', 'replay_request:1', '{}', 'refused')`); err != nil {
		t.Errorf("a refused approval cannot be reported: %v", err)
	}
	// Whatever label is declared, the row records the login.
	var seq int64
	if err := rt.alice.Pool.QueryRow(ctx, `SELECT seq FROM expiryctl.audit_append('bob', 'dlq.list', '', '{}', 'ok')`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	var actor, dbRole string
	if err := rt.alice.Pool.QueryRow(ctx, `SELECT actor, db_role FROM expiryctl.audit_log WHERE seq = $1`, seq).Scan(&actor, &dbRole); err != nil ||
		dbRole != rt.alice.Name || actor != "bob" {
		t.Errorf("actor %q, db_role %q (%v), want the label bob beside the login %s", actor, dbRole, err, rt.alice.Name)
	}
	// Under db-role identity, a label that differs is refused.
	res, err := replay.SetPolicy(ctx, rt.owner, "", map[string]any{"identity_mode": "db-role"})
	if err != nil || !res.Applied {
		t.Fatal(err)
	}
	refused(t, rt.alice.Pool, "identity-db-role", `SELECT * FROM expiryctl.audit_append('bob', 'dlq.list', '', '{}', 'ok')`)
	refused(t, rt.dave.Pool, "identity-db-role", `SELECT * FROM expiryctl.policy_set('erin', '{"max_rate": 1}', '')`)
	// Nobody but the owner manages access, nor grants a group by SQL.
	refused(t, rt.dave.Pool, "privilege", `SELECT expiryctl.access_change('', $1, '{expiryctl_approver}', true)`, rt.alice.Name)
	refused(t, rt.alice.Pool, "privilege", `GRANT expiryctl_approver TO `+pgx.Identifier{rt.alice.Name}.Sanitize())
	refused(t, rt.owner, "groups", `SELECT expiryctl.access_change('', $1, '{pg_read_server_files}', true)`, rt.alice.Name)
	// The auditor reads the trail and nothing of the archive's payloads.
	refused(t, rt.audrey.Pool, "privilege", `SELECT payload FROM expiryctl.dead_letters LIMIT 1`)
	if _, err := rt.audrey.Pool.Exec(ctx, `SELECT count(*) FROM expiryctl.audit_log`); err != nil {
		t.Errorf("the auditor cannot read the trail: %v", err)
	}
	// The ingester captures and does nothing else.
	refused(t, rt.ivan.Pool, "privilege", `SELECT expiryctl.purge_letters('', now() - interval '1000 days', 10, 0)`)
	refused(t, rt.ivan.Pool, "privilege", `SELECT * FROM expiryctl.replay_request_create('', 'replay', '{"ids": [1]}', 1, 0, '', '', 'x', false, false)`)
	// The payload hash is the database's, whatever the client computed.
	var mismatched int
	if err := rt.owner.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE payload_sha256 <> sha256(payload)`).Scan(&mismatched); err != nil || mismatched != 0 {
		t.Errorf("%d letters whose stored hash is not their payload's (%v)", mismatched, err)
	}
}

// TestRedTeamSessionObjects: a caller shapes their own session (temporary
// tables, functions and triggers in pg_temp) before calling a function that
// runs as the owner. Nothing of theirs may run with the owner's rights or
// bend what the function computes.
func TestRedTeamSessionObjects(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	// An operator who is also the auditor: the one group that may create
	// temporary tables (migrate revokes TEMPORARY from PUBLIC).
	olive := rt.db.Login(t, "olive", "expiryctl_operator", "expiryctl_auditor")
	conn, err := pgx.Connect(ctx, olive.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := rt.alice.Pool.Exec(ctx, `CREATE TEMP TABLE dead_letters (id bigint)`); !isPrivilegeError(err) {
		t.Errorf("an operator created a temporary table: %v, want TEMPORARY refused", err)
	}
	for _, sql := range []string{
		`CREATE FUNCTION pg_temp.as_owner() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN UPDATE expiryctl.policy SET max_rate = 999999; RETURN NEW; END $$`,
		`CREATE TEMP TABLE replay_cohort (ordinal integer, id bigint, status text, payload_sha256 bytea, stored_sha256 bytea,
			has_target boolean, redacted boolean)`,
		`CREATE TRIGGER hijack BEFORE INSERT ON pg_temp.replay_cohort FOR EACH ROW EXECUTE FUNCTION pg_temp.as_owner()`,
		`CREATE TEMP TABLE dead_letters (id bigint)`,
		`CREATE TEMP TABLE replay_items (id bigint)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var id int64
	if err := conn.QueryRow(ctx, `SELECT request_id FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, NULL, 0, '', '', 'x', false, false)`,
		fmt.Sprintf(`{"ids": [%d]}`, rt.letters[0])).Scan(&id); err != nil {
		t.Fatalf("request in a session with look-alike objects: %v", err)
	}
	p, err := replay.LoadPolicy(ctx, rt.owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxRate == 999999 {
		t.Fatal("the caller's trigger ran with the owner's rights and changed the policy")
	}
	var items int
	if err := rt.owner.QueryRow(ctx, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1`, id).Scan(&items); err != nil || items != 1 {
		t.Fatalf("the request holds %d items (%v), want 1", items, err)
	}
}
