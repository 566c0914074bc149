package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/store"
)

// TestRedTeamLocksAStrangerCannotTake shuts a login in no group out of the
// database, holds every key the advisory locks used (the audit chain's, a
// request's runner's) from the ingester, and tries the tables that
// replaced them from the ingester and an operator: audited commands and a
// runner go on, and nobody outside the schema's functions locks what they
// guard.
func TestRedTeamLocksAStrangerCannotTake(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0])
	rt.approve(t, rt.bob, req)

	sam := rt.db.Login(t, "sam")
	if conn, err := pgx.Connect(ctx, sam.URL); !isPrivilegeError(err) {
		if err == nil {
			conn.Close(ctx)
		}
		t.Fatalf("a login in no group connected (err %v), want CONNECT refused", err)
	}
	var publicTemp bool
	if err := rt.owner.QueryRow(ctx, `SELECT has_database_privilege('public', current_database(), 'TEMPORARY')`).Scan(&publicTemp); err != nil || publicTemp {
		t.Fatalf("PUBLIC may create temporary tables (%v)", err)
	}
	stranger, err := pgx.Connect(ctx, rt.ivan.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close(ctx)
	for _, sql := range []string{`SELECT pg_advisory_lock(435459991924)`, `SELECT pg_advisory_lock(1380994137, $1::int4)`} {
		args := []any{}
		if strings.Contains(sql, "$1") {
			args = append(args, int32(req.ID))
		}
		if _, err := stranger.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	waited, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := audit.Record(waited, rt.alice.Pool, audit.Entry{Action: "dlq.list"}); err != nil {
		t.Fatalf("an audited command waits on a stranger's advisory lock: %v", err)
	}
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	var took bool
	if err := lock.QueryRow(waited, `SELECT expiryctl.replay_run_acquire($1, 'alice')`, req.ID).Scan(&took); err != nil || !took {
		t.Fatalf("the runner's lease under a stranger's advisory lock: %v, %v", took, err)
	}

	// Neither a stranger nor a member locks the tables in their place.
	for _, who := range []struct {
		name string
		conn *pgx.Conn
	}{{"the ingester", stranger}, {"an operator", lock}} {
		for _, sql := range []string{
			`LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE`,
			`LOCK TABLE expiryctl.audit_chain IN SHARE MODE`,
			`LOCK TABLE expiryctl.replay_runner_leases IN SHARE MODE`,
			`SELECT * FROM expiryctl.replay_runner_leases FOR UPDATE`,
			`SELECT * FROM expiryctl.replay_runner_leases FOR KEY SHARE`,
			`DELETE FROM expiryctl.replay_runner_leases`,
			`UPDATE expiryctl.replay_runner_leases SET pid = pg_backend_pid()`,
		} {
			err := pgx.BeginFunc(ctx, who.conn, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
			if !isPrivilegeError(err) {
				t.Errorf("%s ran %s: %v, want a missing privilege", who.name, sql, err)
			}
		}
	}
	if _, err := stranger.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'sam')`, req.ID); !isPrivilegeError(err) {
		t.Errorf("the ingester took the runner's lease: %v", err)
	}

	// A second runner is refused while the lease's session stands, and
	// takes it once that session is gone.
	second, err := pgx.Connect(ctx, rt.mallory.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(ctx)
	var holder string
	if err := second.QueryRow(ctx, `SELECT expiryctl.replay_run_acquire($1, 'mallory')`, req.ID).Scan(&took); err != nil || took {
		t.Fatalf("a second runner took a held lease: %v, %v", took, err)
	}
	if err := second.QueryRow(ctx, `SELECT login FROM expiryctl.replay_runner_leases WHERE request_id = $1`, req.ID).Scan(&holder); err != nil || holder != rt.alice.Name {
		t.Fatalf("the lease names %q (%v), want %s", holder, err, rt.alice.Name)
	}
	refused(t, rt.mallory.Pool, "single-runner", `SELECT * FROM expiryctl.replay_run_start('', $1)`, req.ID)
	lock.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for took = false; !took && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := second.QueryRow(ctx, `SELECT expiryctl.replay_run_acquire($1, 'mallory')`, req.ID).Scan(&took); err != nil {
			t.Fatal(err)
		}
	}
	if !took {
		t.Fatal("the lease of a session that ended is still held")
	}
}

// TestChainLockWaitIsBoundedAndNamesItsHolder leaves an appending
// transaction open (a member can) and appends from another session: the
// wait ends at its bound with the holder named, instead of never.
func TestChainLockWaitIsBoundedAndNamesItsHolder(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	tx, err := rt.mallory.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := audit.Record(ctx, tx, audit.Entry{Action: "dlq.list"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = audit.Record(ctx, rt.alice.Pool, audit.Entry{Action: "dlq.list"})
	if err == nil || !strings.Contains(err.Error(), "of login "+rt.mallory.Name) || !strings.Contains(err.Error(), "pg_terminate_backend") {
		t.Fatalf("append behind an open appending transaction: %v, want the holder %s named", err, rt.mallory.Name)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Fatalf("the wait took %v, past its 30 s bound", took)
	}
}

func isPrivilegeError(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "42501"
}

// TestRedTeamMigrateLock: an operator holds the advisory key migrate used
// to serialise on, and tries the lock row that replaced it: the owner's
// migrate goes on, and the row is not the operator's to take.
func TestRedTeamMigrateLock(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7311717593230435188)`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO expiryctl.schema_migrate_lock (lock_id, locked) VALUES (1, true)`,
		`UPDATE expiryctl.schema_migrate_lock SET locked = true`,
		`LOCK TABLE expiryctl.schema_migrate_lock IN EXCLUSIVE MODE`,
	} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
		if !isPrivilegeError(err) {
			t.Errorf("an operator ran %s: %v, want a missing privilege", sql, err)
		}
	}
	waited, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := store.Migrate(waited, rt.owner); err != nil {
		t.Fatalf("migrate under an operator's advisory key: %v", err)
	}
}
