package store_test

import (
	"context"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestUpgradeToGovernedSchemaKeepsData builds a database as migration 00007
// left it, with letters, requests in several states and an audit trail, all
// written by one shared login under the old label-based four-eyes, and
// migrates it to today's schema: the data stays, the trail still verifies,
// an open request its requester's own login approved is void, and the groups
// exist with no direct write on any table.
func TestUpgradeToGovernedSchemaKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 7); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE expiryctl.policy SET approvers = '{bob}'`,
		`INSERT INTO expiryctl.dead_letters (fingerprint, source_queue, reason_category, payload, payload_sha256, payload_size, dead_lettered_at, reservation_id)
		 SELECT sha256(int8send(n)), 'q.dlq', 'transient-exhausted', convert_to('{"n":' || n || '}', 'UTF8'),
		        sha256(convert_to('{"n":' || n || '}', 'UTF8')), 8, now() - n * interval '1 minute', 'r-' || n
		   FROM generate_series(1, 5) n`,
		`INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome) VALUES ('alice', 'dlq.list', '', '{"returned": 5}', 'ok')`,
	} {
		if _, err := db.Pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// Three requests of one letter each: one pending, one approved by a
	// label "bob" on the requester's own login (what four-eyes allowed
	// then), one rejected.
	for i, status := range []string{"pending", "approved", "rejected"} {
		letter := int64(i + 1)
		if _, err := db.Pool.Exec(ctx, `WITH r AS (
				INSERT INTO expiryctl.replay_requests (kind, item_count, cohort_hash, rate, stop_failure_ratio, stop_queue_depth,
					stop_redead_ratio, canary_window, why, requested_by, expires_at)
				VALUES ('replay', 1, '\x01', 1, 0.1, 100, 0.1, '1 minute', 'INC-old', 'alice', now() + interval '1 hour')
				RETURNING id)
			INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, ordinal, payload_sha256)
			SELECT r.id, d.id, 0, d.payload_sha256 FROM r, expiryctl.dead_letters d WHERE d.id = $1`, letter); err != nil {
			t.Fatal(err)
		}
		if status != "pending" {
			if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.replay_requests SET status = $2, reviewed_by = 'bob', review_why = 'ok'
				WHERE id = $1`, letter, status); err != nil {
				t.Fatal(err)
			}
		}
	}

	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}

	var letters, items int
	var statuses []string
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM expiryctl.dead_letters), (SELECT count(*) FROM expiryctl.replay_items),
			(SELECT array_agg(status ORDER BY id) FROM expiryctl.replay_requests)`).Scan(&letters, &items, &statuses); err != nil {
		t.Fatal(err)
	}
	if letters != 5 || items != 3 || len(statuses) != 3 || statuses[0] != "pending" || statuses[1] != "cancelled" || statuses[2] != "rejected" {
		t.Fatalf("after the upgrade: %d letters, %d items, requests %v; want 5, 3, [pending cancelled rejected]", letters, items, statuses)
	}
	var freed string
	var voidRows int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT status FROM expiryctl.dead_letter_states WHERE dead_letter_id = 2),
			(SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.cancel' AND actor = 'migration' AND target = 'replay_request:2')`).
		Scan(&freed, &voidRows); err != nil {
		t.Fatal(err)
	}
	if freed != "dead" || voidRows != 1 {
		t.Errorf("the voided request's letter is %q with %d audit rows, want dead and 1", freed, voidRows)
	}
	res, err := audit.VerifyDB(ctx, db.Pool, 0, nil)
	if err != nil || res.Rows != 2 {
		t.Errorf("the trail does not verify after the upgrade: %+v, %v", res, err)
	}
	var groups, writable int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_roles WHERE rolname = ANY ($1) AND NOT rolcanlogin),
			(SELECT count(*) FROM pg_tables t, unnest($1::text[]) g
			  WHERE t.schemaname = 'expiryctl' AND has_table_privilege(g, 'expiryctl.' || t.tablename, 'INSERT,UPDATE,DELETE,TRUNCATE'))`,
		pgtest.AllGroups).Scan(&groups, &writable); err != nil {
		t.Fatal(err)
	}
	if groups != 5 || writable != 0 {
		t.Errorf("%d groups, %d (group, table) pairs writable directly; want 5 and 0", groups, writable)
	}
}
