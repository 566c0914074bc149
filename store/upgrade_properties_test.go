package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// oldIngest is a batch as binaries of before migration 00010 store it:
// ingest_letters without properties, headers with plain integers.
const oldIngest = `SELECT expiryctl.ingest_letters('old-binary', 'q.dlq',
	ARRAY[sha256($1::bytea)], ARRAY[$2::text], ARRAY['m-1'], ARRAY['r-1'], ARRAY[$2::text], ARRAY[1::bigint],
	ARRAY[NULL::timestamptz], ARRAY['q.dlq'], ARRAY[NULL::text], ARRAY['reservations'], ARRAY['reservation.expire'],
	ARRAY['transient-exhausted'], ARRAY['db_timeout'], ARRAY['timeout'], ARRAY[3], ARRAY['[]'],
	ARRAY['{"x-retry-count": 2, "x-tenant": "acme"}'], ARRAY['application/json'], ARRAY[$1::bytea],
	ARRAY[now()], ARRAY[NULL::bigint], ARRAY[0])`

// TestUpgradeToLetterPropertiesKeepsLetters migrates an archive of 00009
// to today's schema: its letters keep their headers and say that their
// properties were not recorded, the old ingest_letters still stores for a
// binary not yet upgraded, and properties are as immutable as payloads.
func TestUpgradeToLetterPropertiesKeepsLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, oldIngest, []byte(`{"n":1}`), "expire:r-1:v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	// A binary of before the migration still captures, without properties.
	if _, err := db.Pool.Exec(ctx, oldIngest, []byte(`{"n":2}`), "expire:r-2:v1"); err != nil {
		t.Fatalf("the old ingest_letters after the upgrade: %v", err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT properties IS NULL, headers::text FROM expiryctl.dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var unrecorded bool
		var headers string
		if err := rows.Scan(&unrecorded, &headers); err != nil {
			t.Fatal(err)
		}
		n++
		if !unrecorded || headers != `{"x-tenant": "acme", "x-retry-count": 2}` {
			t.Errorf("letter %d: properties recorded %v, headers %s; want not recorded and the headers as stored", n, !unrecorded, headers)
		}
	}
	if err := rows.Err(); err != nil || n != 2 {
		t.Fatalf("%d letters (%v), want 2", n, err)
	}
	// Even the owner cannot give a letter properties after the fact.
	for name, stmt := range map[string]string{
		"setting a letter's properties": `UPDATE expiryctl.dead_letters SET properties = '{"user_id": "guest"}' WHERE id = 1`,
		"a redaction that also changes the properties": `UPDATE expiryctl.dead_letters SET payload = '', headers = '{}',
			redacted_at = now(), properties = '{}' WHERE id = 1`,
	} {
		_, err := db.Pool.Exec(ctx, stmt)
		var refusal *store.Refusal
		if !errors.As(store.AsRefusal(err), &refusal) || refusal.Rule != "letter-immutable" {
			t.Errorf("%s: %v, want the letter-immutable refusal", name, err)
		}
	}
}

// TestUpgradeFromFirstGovernedSchemaRepairsIt: a database migrated by 00008
// as it first shipped gets 00009's repairs: only operators cancel, the
// canary has its function, audit_reserved is gone, and no function is
// PUBLIC's.
func TestUpgradeFromFirstGovernedSchemaRepairsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 8); err != nil {
		t.Fatal(err)
	}
	var approverCancels bool
	if err := db.Pool.QueryRow(ctx, `SELECT has_function_privilege('expiryctl_approver',
		'expiryctl.replay_cancel(text, bigint, text)', 'EXECUTE')`).Scan(&approverCancels); err != nil || !approverCancels {
		t.Fatalf("00008 as first shipped should let approvers cancel (%v): the test no longer starts from it", err)
	}
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	var cancels, canary, reserved bool
	var public int
	if err := db.Pool.QueryRow(ctx, `SELECT
		has_function_privilege('expiryctl_approver', 'expiryctl.replay_cancel(text, bigint, text)', 'EXECUTE'),
		has_function_privilege('expiryctl_operator', 'expiryctl.replay_canary_record(text, bigint, boolean, jsonb)', 'EXECUTE'),
		to_regprocedure('expiryctl.audit_reserved(text)') IS NOT NULL,
		(SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		  WHERE n.nspname = 'expiryctl' AND has_function_privilege('public', p.oid, 'EXECUTE'))`).
		Scan(&cancels, &canary, &reserved, &public); err != nil {
		t.Fatal(err)
	}
	if cancels || !canary || reserved || public != 0 {
		t.Errorf("after the upgrade: approvers cancel %v, operators record canaries %v, audit_reserved left %v, %d functions PUBLIC's",
			cancels, canary, reserved, public)
	}
}
