package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestOnlyTheFunctionsWrite holds every table of the schema to row
// security with one policy, which lets a login read and nothing else: a
// table added without it fails here.
func TestOnlyTheFunctionsWrite(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	rows, err := rt.owner.Query(context.Background(), `SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
		       coalesce((SELECT array_agg(p.polcmd::text || ':' || pg_get_expr(p.polqual, p.polrelid)) FROM pg_policy p WHERE p.polrelid = c.oid), '{}')
		FROM pg_class c WHERE c.relnamespace = 'expiryctl'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type table struct {
		name        string
		rls, forced bool
		policies    []string
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var tb table
		err := r.Scan(&tb.name, &tb.rls, &tb.forced, &tb.policies)
		return tb, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("read %d tables of the schema, want them all", len(tables))
	}
	for _, tb := range tables {
		if !tb.rls || tb.forced || len(tb.policies) != 1 || tb.policies[0] != "r:true" {
			t.Errorf("table %s: row security %v (forced %v), policies %v; want it on, not forced, and one policy reads (FOR SELECT USING (true))",
				tb.name, tb.rls, tb.forced, tb.policies)
		}
	}
}

// TestRedTeamWriteAllData is a member of pg_write_all_data (and of the
// auditor group, to connect) writing the tables directly: it changes no
// row and inserts none, and the functions still write.
func TestRedTeamWriteAllData(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0], rt.letters[1])
	wally := rt.db.Login(t, "wally", "expiryctl_auditor")
	if _, err := rt.db.Superuser(t).Exec(ctx, "GRANT pg_write_all_data TO "+pgx.Identifier{wally.Name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, wally.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		`UPDATE expiryctl.dead_letter_states SET status = 'dead'`,
		`UPDATE expiryctl.replay_requests SET status = 'approved', item_count = 1000`,
		`UPDATE expiryctl.policy SET max_rate = 100000`,
		`DELETE FROM expiryctl.replay_items`,
		`DELETE FROM expiryctl.audit_log`,
		`UPDATE expiryctl.replay_runner_leases SET pid = pg_backend_pid()`,
	} {
		// Row security hides every row from the write; a trigger that
		// the statement fires anyway may refuse it outright.
		tag, err := conn.Exec(ctx, sql)
		if err == nil && tag.RowsAffected() != 0 {
			t.Errorf("%s: changed %d rows, want it to find none", sql, tag.RowsAffected())
		}
	}
	for _, sql := range []string{
		`INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash, why, requested_by, requested_db_role) VALUES ('replay', '{}', 1, '\x00', 'x', 'w', 'w')`,
		`INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome) VALUES ('bob', 'replay.approve', 'replay_request:1', '{}', 'ok')`,
		`INSERT INTO expiryctl.audit_chain DEFAULT VALUES`,
	} {
		if _, err := conn.Exec(ctx, sql); !isPrivilegeError(err) {
			t.Errorf("%s: %v, want refused by row security", sql, err)
		}
	}
	var status string
	var items int
	if err := rt.owner.QueryRow(ctx, `SELECT status, item_count FROM expiryctl.replay_requests WHERE id = $1`, req.ID).Scan(&status, &items); err != nil ||
		status != "pending" || items != 2 {
		t.Fatalf("the request is %s of %d items (%v) after the direct writes, want pending of 2", status, items, err)
	}
	// The functions write as before.
	rt.approve(t, rt.bob, req)
}
