package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/replay"
)

// TestSignedApprovalsAgainstASuperuser: a runner with a keyring publishes
// only approvals its approvers signed, for exactly the request it runs.
// The PostgreSQL superuser forges an approval row, edits an approved
// request's rate, target and cohort, moves a valid signature onto another
// request, and names the signer as the requester: each run publishes
// nothing and names why. A signature by a key outside the keyring is
// refused too; the genuine one runs.
func TestSignedApprovalsAgainstASuperuser(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t, 6, "canary_window=1s")
	bob := w.db.GrantedLogin(t, "bob", "expiryctl_approver")
	carol := w.db.GrantedLogin(t, "carol", "expiryctl_approver")
	asBob, asCarol := newCLI(bob.URL, ""), newCLI(carol.URL, "")
	dir := t.TempDir()
	bobKey, carolKey, keyring := filepath.Join(dir, "bob.key"), filepath.Join(dir, "carol.key"), filepath.Join(dir, "approvers.keys")
	r := asBob.ok(t, "keys", "generate", "--out", bobKey)
	bobVerifier := r.stdout
	if !strings.HasPrefix(r.stdout, bob.Name+"+") {
		t.Fatalf("bob's verifier key is not named after his login: %s", r)
	}
	if err := os.WriteFile(keyring, []byte("# approvers\n"+r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	carolVerifier := asCarol.ok(t, "keys", "generate", "--out", carolKey).stdout // not in the keyring

	published := func() int {
		ready, _ := newRabbit(t).inspect(t, w.topo.Queue)
		return ready
	}
	super := func(stmts ...string) {
		t.Helper()
		ctx := withTimeout(t)
		err := pgx.BeginFunc(ctx, w.db.Pool, func(tx pgx.Tx) error {
			for _, s := range append(append([]string{`ALTER TABLE expiryctl.replay_requests DISABLE TRIGGER ALL`}, stmts...),
				`ALTER TABLE expiryctl.replay_requests ENABLE TRIGGER ALL`) {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var last int64
	fresh := func() string {
		t.Helper()
		if last != 0 {
			w.cli.ok(t, "replay", "cancel", strconv.FormatInt(last, 10), "--why", "next case")
		}
		// No worker consumes the queue here: the handler check is the
		// requester's word, so that the signature is what decides.
		last = w.request(t, replay.NewRequest{Rate: 200, SameHandlerWhy: "the database recovered"}).ID
		return strconv.FormatInt(last, 10)
	}
	refused := func(id, want string, args ...string) {
		t.Helper()
		r := w.cli.exits(t, 4, append([]string{"replay", "run", id, "--keyring", keyring}, args...)...)
		if !strings.Contains(r.stderr, "signed-approval") || !strings.Contains(r.stderr, want) {
			t.Errorf("run of request %s: %s; want rule signed-approval and %q", id, r, want)
		}
		if n := published(); n != 0 {
			t.Fatalf("a refused run published %d messages", n)
		}
	}

	id := fresh()
	w.approve(t, last)
	refused(id, "without a signature")

	id = fresh()
	super(`UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob', reviewed_db_role = '` + bob.Name +
		`', reviewed_at = now(), approval_expires_at = now() + interval '1 hour' WHERE id = ` + id)
	refused(id, "without a signature")

	id = fresh()
	asBob.ok(t, "replay", "approve", id, "--key", bobKey, "--why", "checked")
	super(`UPDATE expiryctl.replay_requests SET rate = 5000 WHERE id = ` + id)
	refused(id, `"rate 5000"`)
	super(`UPDATE expiryctl.replay_requests SET rate = 200, to_exchange = 'elsewhere' WHERE id = ` + id)
	refused(id, "override")
	super(`UPDATE expiryctl.replay_requests SET to_exchange = NULL, cohort_hash = sha256('another cohort') WHERE id = ` + id)
	refused(id, "cohort")
	var signed string
	if err := w.db.Pool.QueryRow(context.Background(), `SELECT approval_note FROM expiryctl.replay_requests WHERE id = $1`, last).Scan(&signed); err != nil {
		t.Fatal(err)
	}

	id = fresh()
	super(`UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob', reviewed_db_role = '` + bob.Name +
		`', reviewed_at = now(), approval_expires_at = now() + interval '1 hour', approval_note = ` + quote(signed) + ` WHERE id = ` + id)
	refused(id, "request")

	id = fresh()
	asBob.ok(t, "replay", "approve", id, "--key", bobKey, "--why", "checked")
	super(`ALTER TABLE expiryctl.replay_requests DROP CONSTRAINT four_eyes_login`,
		`UPDATE expiryctl.replay_requests SET requested_db_role = '`+bob.Name+`' WHERE id = `+id)
	refused(id, "who requested it")

	id = fresh()
	asCarol.ok(t, "replay", "approve", id, "--key", carolKey, "--why", "checked")
	refused(id, "not in the keyring")
	if r := w.cli.exits(t, 4, "replay", "run", id, "--require-signed-approvals"); !strings.Contains(r.stderr, "no keyring") {
		t.Errorf("signatures required without a keyring: %s", r)
	}

	// The policy requires signatures of every runner: one without a
	// keyring runs nothing.
	w.cli.ok(t, "policy", "set", "signed_approvals=true", "--why", "every run checks its approval")
	id = fresh()
	asBob.ok(t, "replay", "approve", id, "--key", bobKey, "--why", "checked")
	if r := w.cli.exits(t, 4, "replay", "run", id); !strings.Contains(r.stderr, "policy requires every runner") || published() != 0 {
		t.Errorf("a runner without a keyring under the policy: %s", r)
	}

	id = fresh()
	r = asBob.ok(t, "replay", "approve", id, "--key", bobKey, "--why", "checked")
	if !strings.Contains(r.stderr, "signed with your key") {
		t.Errorf("a signed approval: %s", r)
	}
	r = w.cli.ok(t, "replay", "run", id, "--keyring", keyring)
	if !strings.Contains(r.stderr, "checked against this runner's keyring") || published() != 6 {
		t.Errorf("the genuine signed approval: %s; %d published", r, published())
	}
	var audited int
	if err := w.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.approve'
		AND target = 'replay_request:' || $1 AND details ->> 'signed_statement' LIKE 'expiryctl replay approval v1%'`, id).Scan(&audited); err != nil || audited != 1 {
		t.Errorf("%d audit rows carry the signed statement (%v), want 1", audited, err)
	}

	// Offline, every signed approval of the trail is checked against the
	// reviewer's keyring: carol's key is not in it.
	trail := filepath.Join(dir, "trail.ndjson")
	w.cli.ok(t, "audit", "export", "--out", trail)
	offline := newCLI("postgres://nobody@127.0.0.1:1/none?sslmode=disable", "")
	if r := offline.exits(t, 7, "audit", "verify", "--file", trail, "--keyring", keyring); !strings.Contains(r.stderr, "approval-signature") ||
		!strings.Contains(r.stderr, "not in the keyring") {
		t.Errorf("an approval by a key outside the keyring, offline: %s", r)
	}
	both := filepath.Join(dir, "both.keys")
	if err := os.WriteFile(both, []byte(bobVerifier+carolVerifier), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := offline.ok(t, "audit", "verify", "--file", trail, "--keyring", both); !strings.Contains(r.stderr, "5 signed approvals verified") ||
		!strings.Contains(r.stderr, "1 approvals unsigned") {
		t.Errorf("the signed approvals offline: %s", r)
	}
}

// quote is a SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
