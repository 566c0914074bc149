package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// TestAuditRowsNameTheirBuild: a session that names its build
// (store.Options.Build, the setting expiryctl.build) gets it in the details
// of every audit row it writes, through audit_append and through the
// functions' own audit_write, in place of any "build" a caller put in the
// details; a session that names none records none. The hash covers it,
// and no one, a person's login or the owner, rewrites it afterwards.
func TestAuditRowsNameTheirBuild(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	const build = "v1.2.0 (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, modified)"
	open := func(url string) *pgxpool.Pool {
		pool, err := store.OpenWith(ctx, url, store.Options{Build: build})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	alice, dave := open(rt.alice.URL), open(rt.dave.URL)

	var claimed, plain int64
	if err := alice.QueryRow(ctx, `SELECT seq FROM expiryctl.audit_append('', 'dlq.list', '', '{"build": "v9.9.9 (forged)", "rows": 3}', 'ok')`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if err := rt.alice.Pool.QueryRow(ctx, `SELECT seq FROM expiryctl.audit_append('', 'dlq.list', '', '{"build": "v9.9.9 (forged)"}', 'ok')`).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, dave, "", map[string]any{"max_rate": 7}); err != nil {
		t.Fatalf("dave proposes a policy change: %v", err)
	}
	var proposed int64
	if err := rt.owner.QueryRow(ctx, `SELECT max(seq) FROM expiryctl.audit_log WHERE action = 'policy.propose'`).Scan(&proposed); err != nil {
		t.Fatal(err)
	}

	detail := func(seq int64) (got *string, rows *string) {
		t.Helper()
		if err := rt.owner.QueryRow(ctx, `SELECT details->>'build', details->>'rows' FROM expiryctl.audit_log WHERE seq = $1`, seq).Scan(&got, &rows); err != nil {
			t.Fatal(err)
		}
		return got, rows
	}
	if got, rows := detail(claimed); got == nil || *got != build || rows == nil || *rows != "3" {
		t.Errorf("audit_append from a session naming its build: details build %v rows %v, want %q and the caller's rows", got, rows, build)
	}
	if got, _ := detail(plain); got != nil {
		t.Errorf("audit_append from a session naming no build: details build %q, want none (not the caller's)", *got)
	}
	if got, _ := detail(proposed); got == nil || *got != build {
		t.Errorf("policy.propose (audit_write) from a session naming its build: %v, want %q", got, build)
	}

	// A person's own SQL cannot change the build of a row after the fact,
	// whatever the session sets; neither can the owner.
	for _, pool := range []*pgxpool.Pool{alice, rt.owner} {
		tag, err := pool.Exec(ctx, `UPDATE expiryctl.audit_log SET details = jsonb_set(details, '{build}', '"v0.0.1 (commit 0000000)"') WHERE seq = $1`, claimed)
		if err == nil && tag.RowsAffected() != 0 {
			t.Errorf("an UPDATE of a row's build changed %d rows", tag.RowsAffected())
		}
	}
	if got, _ := detail(claimed); got == nil || *got != build {
		t.Errorf("after the UPDATEs the row's build is %v, want %q", got, build)
	}

	// The hash covers the build as part of the details, in the encoding
	// rows were always hashed with.
	var bad int64
	if err := rt.owner.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log
		WHERE hash <> sha256(expiryctl.audit_canonical(seq, at, actor, db_role, action, target, details, outcome, prev_hash))`).Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d rows do not hash as audit_canonical (%v)", bad, err)
	}
}
