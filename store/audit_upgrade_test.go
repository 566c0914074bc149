package store_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// trailBeforeDefaults builds a database as expiryctl left it before
// migration 00004, and appends rows through its chain trigger: the fields a
// canonical encoding most easily gets wrong (backslashes, quotes, newlines,
// control characters, non-ASCII text, nested JSON).
func trailBeforeDefaults(t *testing.T) *pgtest.Database {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	if err := store.MigrateTo(ctx, db.Pool, 3); err != nil {
		t.Fatal(err)
	}
	for _, row := range [][4]string{
		{`alice`, `dlq.show`, `dead_letter:1`, `{"filter": {"search": "a\\b \"q\" \n\t\u0001"}}`},
		{`bøb ✓`, `replay.request`, `C:\temp\x`, `{"ids": [1, 2, 3], "why": "INC-42 — ünïcødé", "nested": {"k": [true, null, 1.5]}}`},
		{`carol`, `audit.export`, ``, `{}`},
	} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
			VALUES ($1, $2, $3, $4::jsonb, 'ok')`, row[0], row[1], row[2], row[3]); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestAuditChainSurvivesTheMoveToDefaults checks that migration 00004 keeps
// every stored hash (the generated column computes the same bytes as the
// trigger did), that new rows continue the old chain, and that the whole
// trail verifies.
func TestAuditChainSurvivesTheMoveToDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := trailBeforeDefaults(t)
	before := map[int64][]byte{}
	rows, err := db.Pool.Query(ctx, `SELECT seq, hash FROM expiryctl.audit_log`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq int64
		var hash []byte
		if err := rows.Scan(&seq, &hash); err != nil {
			t.Fatal(err)
		}
		before[seq] = hash
	}
	if rows.Err() != nil || len(before) != 3 {
		t.Fatalf("before the migration: %d rows, %v", len(before), rows.Err())
	}

	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	for seq, want := range before {
		var got []byte
		if err := db.Pool.QueryRow(ctx, `SELECT hash FROM expiryctl.audit_log WHERE seq = $1`, seq).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("seq %d: hash %x after the migration, %x before", seq, got, want)
		}
	}
	a, err := audit.Append(ctx, db.Pool, audit.Entry{Actor: "dave", Action: "dlq.list", Details: map[string]any{"limit": 50}})
	if err != nil {
		t.Fatal(err)
	}
	var prev []byte
	if err := db.Pool.QueryRow(ctx, `SELECT prev_hash FROM expiryctl.audit_log WHERE seq = $1`, a.Seq).Scan(&prev); err != nil {
		t.Fatal(err)
	}
	if a.Seq != 4 || !bytes.Equal(prev, before[3]) {
		t.Errorf("the first row after the migration is seq %d linking to %x, want seq 4 linking to seq 3", a.Seq, prev)
	}
	res, err := audit.VerifyDB(ctx, db.Pool, 0, nil)
	if err != nil || res.Rows != 4 {
		t.Fatalf("verify after the migration: %+v, %v", res, err)
	}
}

// TestAuditMigrationRefusesATamperedTrail checks that migration 00004, which
// re-derives every hash, refuses a trail whose stored hash no longer matches
// its row, rather than hiding the change.
func TestAuditMigrationRefusesATamperedTrail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := trailBeforeDefaults(t)
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_no_update;
		UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 2;
		ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	_, err := store.Migrate(ctx, db.Pool)
	if err == nil || !strings.Contains(err.Error(), "stored hash of seq 2 does not match its fields") {
		t.Fatalf("migrating a tampered trail: %v", err)
	}
	var version int64
	if err := db.Pool.QueryRow(ctx, `SELECT max(version_id) FROM expiryctl.schema_version WHERE is_applied`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != 3 {
		t.Fatalf("the refused migration left the schema at version %d, want 3", version)
	}
}
