package e2e_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestAuditCheckpointAsPeople: an auditor makes a key and signs a
// checkpoint; the trail verifies against it as it grows; the owner cuts
// the tail behind the guards and the checkpoint catches it (exit 7),
// naming the rows; a checkpoint checked with another key is refused.
func TestAuditCheckpointAsPeople(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	dir := t.TempDir()
	key, vkeyFile, cpFile := filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.vkey"), filepath.Join(dir, "cp.txt")

	r := audrey.ok(t, "audit", "keygen", "--out", key, "--name", "audrey-audit")
	vkey := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(vkey, "audrey-audit+") {
		t.Fatalf("keygen printed %q, want a verifier key named audrey-audit", r.stdout)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the signing key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	if r := audrey.exits(t, 2, "audit", "keygen", "--out", key); !strings.Contains(r.stderr, "never overwrites") {
		t.Errorf("keygen over an existing key: %s", r)
	}
	if err := os.WriteFile(vkeyFile, []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for range 3 {
		alice.ok(t, "dlq", "summary")
	}
	r = audrey.ok(t, "audit", "checkpoint", "--key", key, "--out", cpFile)
	if !strings.Contains(r.stderr, "signed checkpoint of") {
		t.Errorf("checkpoint: %s", r)
	}
	if r := alice.run(t, "audit", "checkpoint", "--key", key); r.code != 4 {
		t.Errorf("an operator signed a checkpoint: %s", r)
	}
	alice.ok(t, "dlq", "summary")
	r = audrey.ok(t, "audit", "verify", "--checkpoint", cpFile, "--verifier", vkeyFile)
	if !strings.Contains(r.stdout, "extend the checkpoint of") || !strings.Contains(r.stdout, "signed by audrey-audit") {
		t.Errorf("verify against the checkpoint: %s", r)
	}
	// The key as text works as well as the file.
	audrey.ok(t, "audit", "verify", "--checkpoint", cpFile, "--verifier", vkey)

	_, otherKey := keygen(t, audrey, filepath.Join(dir, "other.key"))
	if r := audrey.exits(t, 7, "audit", "verify", "--checkpoint", cpFile, "--verifier", otherKey); !strings.Contains(r.stderr, "not signed by") {
		t.Errorf("a checkpoint checked with another key: %s", r)
	}

	// A filtered export is evidence a reviewer checks with no database.
	evidence := filepath.Join(dir, "summaries.evidence")
	r = audrey.ok(t, "audit", "export", "--action", "dlq.summary", "--out", evidence)
	if !strings.Contains(r.stderr, "exported 4 rows as evidence: 3 with inclusion proofs") {
		t.Errorf("a filtered export after a checkpoint: %s", r)
	}
	r = newCLI("postgres://nobody@127.0.0.1:1/none?sslmode=disable", "").ok(t, "audit", "verify", "--file", evidence, "--verifier", vkeyFile)
	if !strings.Contains(r.stdout, "verified 4 rows of "+evidence+": 3 proved in the checkpoint") {
		t.Errorf("the evidence offline: %s", r)
	}
	if r := audrey.exits(t, 2, "audit", "verify", "--file", evidence); !strings.Contains(r.stderr, "pass --verifier") {
		t.Errorf("evidence without a verifier: %s", r)
	}

	// The owner cuts the tail behind the append-only guards.
	ctx := withTimeout(t)
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, sql := range []string{`ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_no_delete`,
			`DELETE FROM expiryctl.audit_log WHERE seq > 2`,
			`ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_delete`} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The chain alone cannot see a cut tail; its own audit row now takes
	// seq 3, where the checkpoint recorded another.
	audrey.ok(t, "audit", "verify")
	r = audrey.exits(t, 7, "audit", "verify", "--checkpoint", cpFile, "--verifier", vkeyFile)
	if !strings.Contains(r.stderr, "first bad seq 3 (checkpoint-mismatch)") ||
		!strings.Contains(r.stderr, "seq 3 is the first row that is not the one the tree recorded") {
		t.Errorf("a cut tail against the checkpoint: %s", r)
	}
}

// TestEvidenceAgainstHeldCheckpoints: a reviewer who kept checkpoints
// outside the database binds an evidence file to them offline. With the
// newest stored checkpoint deleted by a superuser, exports fall back to an
// older one, and the reviewer holding the newer sees a rollback; a whole
// export with a row taken out is refused.
func TestEvidenceAgainstHeldCheckpoints(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	offline := newCLI("postgres://nobody@127.0.0.1:1/none?sslmode=disable", "")
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	cp1, cp2 := filepath.Join(dir, "cp1.txt"), filepath.Join(dir, "cp2.txt")
	alice.ok(t, "dlq", "summary")
	audrey.ok(t, "audit", "checkpoint", "--key", key, "--out", cp1)
	alice.ok(t, "dlq", "summary")
	audrey.ok(t, "audit", "checkpoint", "--key", key, "--out", cp2)
	alice.ok(t, "dlq", "summary")

	fresh := filepath.Join(dir, "fresh.evidence")
	audrey.ok(t, "audit", "export", "--action", "dlq.summary", "--out", fresh)
	if r := offline.ok(t, "audit", "verify", "--file", fresh, "--verifier", vkey, "--checkpoint", cp1); !strings.Contains(r.stdout, "extends yours") {
		t.Errorf("evidence against an older held checkpoint: %s", r)
	}
	if r := offline.ok(t, "audit", "consistency", cp1, cp2, "--verifier", vkey, "--evidence", fresh); !strings.Contains(r.stdout, "extends the checkpoint of") {
		t.Errorf("consistency from the evidence alone: %s", r)
	}
	audrey.ok(t, "audit", "consistency", cp1, cp2, "--verifier", vkey)
	if r := audrey.exits(t, 7, "audit", "consistency", cp2, cp1, "--verifier", vkey); !strings.Contains(r.stderr, "checkpoint-rollback") {
		t.Errorf("checkpoints in the wrong order: %s", r)
	}

	whole := filepath.Join(dir, "whole.evidence")
	audrey.ok(t, "audit", "export", "-o", "evidence", "--out", whole)
	offline.ok(t, "audit", "verify", "--file", whole, "--verifier", vkey, "--checkpoint", cp2)
	data, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	cut := filepath.Join(dir, "cut.evidence")
	if err := os.WriteFile(cut, []byte(strings.Join(append(lines[:2:2], lines[3:]...), "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := offline.exits(t, 7, "audit", "verify", "--file", cut, "--verifier", vkey); !strings.Contains(r.stderr, "first bad seq 2 (gap)") {
		t.Errorf("a whole export with a row taken out: %s", r)
	}

	// A superuser deletes the newest stored checkpoint.
	if _, err := db.Pool.Exec(withTimeout(t), `BEGIN;
		ALTER TABLE expiryctl.audit_checkpoints DISABLE TRIGGER ALL;
		DELETE FROM expiryctl.audit_checkpoints WHERE id = (SELECT max(id) FROM expiryctl.audit_checkpoints);
		ALTER TABLE expiryctl.audit_checkpoints ENABLE TRIGGER ALL;
		COMMIT`); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "stale.evidence")
	audrey.ok(t, "audit", "export", "--action", "dlq.summary", "--out", stale)
	offline.ok(t, "audit", "verify", "--file", stale, "--verifier", vkey)
	if r := offline.exits(t, 7, "audit", "verify", "--file", stale, "--verifier", vkey, "--checkpoint", cp2); !strings.Contains(r.stderr, "checkpoint-rollback") {
		t.Errorf("a rolled-back export against the newer held checkpoint: %s", r)
	}
	if r := audrey.exits(t, 7, "audit", "export", "--action", "dlq.summary", "--from-checkpoint", cp2, "--out", filepath.Join(dir, "x")); !strings.Contains(r.stderr, "checkpoint-rollback") {
		t.Errorf("an export asked to extend a checkpoint the database no longer has: %s", r)
	}
}

// TestCheckpointSignerEvery: a long-lived signer signs at once, again when
// rows are written, not while the trail is quiet, keeps each checkpoint in
// its directory, and stops cleanly; a login that may not sign is told at
// once rather than every interval.
func TestCheckpointSignerEvery(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	kept := filepath.Join(dir, "checkpoints")
	if err := os.Mkdir(kept, 0o700); err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(kept, "checkpoint-*.txt"))
		return m
	}
	p := audrey.start(t, "audit", "checkpoint", "--key", key, "--every", "1s", "--out-dir", kept)
	// The trail is empty: the signer waits for a row rather than failing.
	waitFor(t, 30*time.Second, "the signer to start", func() bool {
		if p.exited() {
			t.Fatalf("the signer exited: %s", p.wait(time.Second))
		}
		return strings.Contains(p.stderr.String(), "signing every 1s")
	})
	if !strings.Contains(p.stderr.String(), "no rows yet") || len(files()) != 0 {
		t.Errorf("an empty trail: %d checkpoints, stderr %q", len(files()), p.stderr.String())
	}
	alice.ok(t, "dlq", "summary")
	waitFor(t, 30*time.Second, "the first checkpoint", func() bool { return len(files()) == 1 })
	alice.ok(t, "dlq", "summary")
	waitFor(t, 30*time.Second, "a checkpoint of the rows written since", func() bool { return len(files()) == 2 })
	time.Sleep(3 * time.Second)
	if n := len(files()); n != 2 {
		t.Errorf("%d checkpoints after 3 quiet seconds, want still 2: an unchanged tree is not signed again", n)
	}
	p.signal(syscall.SIGTERM)
	if r := p.wait(30 * time.Second); r.code != 0 || strings.Count(r.stderr, "signed checkpoint of") != 2 {
		t.Errorf("the signer stopped with %s", r)
	}
	for _, f := range files() {
		audrey.ok(t, "audit", "verify", "--checkpoint", f, "--verifier", vkey)
	}
	if r := alice.exits(t, 4, "audit", "checkpoint", "--key", key, "--every", "1s", "--out-dir", kept); !strings.Contains(r.stderr, "auditor") {
		t.Errorf("an operator's signer: %s", r)
	}
}

func keygen(t *testing.T, c *cli, path string) (string, string) {
	t.Helper()
	r := c.ok(t, "audit", "keygen", "--out", path)
	return path, strings.TrimSpace(r.stdout)
}

// TestIngestFollowSignsCheckpoints: a long-running capture, on the
// ingester's own login, signs checkpoints as it goes, and they verify. The
// login is an auditor too: only auditors record checkpoints, and a capture
// that is an ingester only is told so.
func TestIngestFollowSignsCheckpoints(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ingester := newCLI(db.Login(t, "ingest-svc", "expiryctl_ingester", "expiryctl_auditor").URL, "")
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	audrey.ok(t, "audit", "list") // a trail to checkpoint: the capture of an empty queue writes none
	onlyIngester := newCLI(db.Login(t, "ingest-only", "expiryctl_ingester").URL, "")
	refusedCapture := onlyIngester.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--checkpoint-key", key, "--checkpoint-every", "1s")
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(refusedCapture.stderr.String(), "no audit checkpoint this time"); {
		if time.Now().After(deadline) || refusedCapture.exited() {
			t.Fatalf("an ingester-only capture was not told its checkpoint was refused: %s", refusedCapture.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	refusedCapture.signal(syscall.SIGTERM)
	if res := refusedCapture.wait(10 * time.Second); !strings.Contains(res.stderr, "expiryctl_auditor") {
		t.Errorf("the refusal does not name the auditor group: %s", res)
	}

	p := ingester.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--checkpoint-key", key, "--checkpoint-every", "1s")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), "signed audit checkpoint of") {
		if time.Now().After(deadline) || p.exited() {
			p.signal(syscall.SIGTERM)
			t.Fatalf("no checkpoint signed within 20 s: %s", p.wait(10*time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.signal(syscall.SIGTERM)
	if res := p.wait(10 * time.Second); res.code != 0 {
		t.Fatalf("ingest --follow did not stop cleanly: %s", res)
	}
	ctx := withTimeout(t)
	var note string
	if err := db.Pool.QueryRow(ctx, `SELECT signed_note FROM expiryctl.audit_checkpoints ORDER BY id DESC LIMIT 1`).Scan(&note); err != nil {
		t.Fatalf("no stored checkpoint: %v", err)
	}
	cpFile := filepath.Join(dir, "cp.txt")
	if err := os.WriteFile(cpFile, []byte(note), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := audrey.ok(t, "audit", "verify", "--checkpoint", cpFile, "--verifier", vkey); !strings.Contains(r.stdout, "extend the checkpoint") {
		t.Errorf("the ingester's checkpoint does not verify: %s", r)
	}
}

// TestReconcileCatchesAnApprovalByHand: a request the owner approved in
// psql, with no approval event, is named by `audit verify --reconcile`
// (exit 7), table, key and column.
func TestReconcileCatchesAnApprovalByHand(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	alice := newCLI(db.GrantedLogin(t, "alice", "expiryctl_operator").URL, "")
	audrey := newCLI(db.GrantedLogin(t, "audrey", "expiryctl_auditor").URL, "")
	letters := make([]deadletter.Letter, 2)
	for i := range letters {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"k-%d"}`, i, i)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("k-%d", i), SourceQueue: "q.dlq",
			OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire", Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, i, 0, time.UTC)}
	}
	if _, err := deadletter.Insert(withTimeout(t), db.Pool, letters); err != nil {
		t.Fatal(err)
	}
	alice.ok(t, "replay", "request", "--id", "1", "--id", "2", "--why", "INC-5")
	if r := audrey.ok(t, "audit", "verify", "--reconcile"); !strings.Contains(r.stdout, "every state has an event behind it") {
		t.Fatalf("an untouched database does not reconcile: %s", r)
	}
	ctx := withTimeout(t)
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, sql := range []string{`SET LOCAL session_replication_role = replica`,
			`UPDATE expiryctl.replay_requests SET status = 'approved', reviewed_by = 'bob', reviewed_db_role = 'bob' WHERE id = 1`} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := audrey.exits(t, 7, "audit", "verify", "--reconcile")
	if !strings.Contains(r.stdout, "replay_requests") || !strings.Contains(r.stdout, "id 1") || !strings.Contains(r.stdout, "status") ||
		!strings.Contains(r.stderr, "have no event behind them") {
		t.Errorf("an approval by hand: %s", r)
	}
}

// TestFilteredEvidenceIsComplete: an auditor's export of one action is
// proved complete up to its checkpoint; a row a superuser deletes from the
// database stops the export, and a row withheld from a file and its list
// fails the verification offline; a filter the count tree cannot settle
// verifies as not proved complete, and fails under --complete.
func TestFilteredEvidenceIsComplete(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	audrey := newCLI(db.Login(t, "audrey", "expiryctl_auditor").URL, "")
	alice := newCLI(db.Login(t, "alice", "expiryctl_operator").URL, "")
	offline := newCLI("postgres://nobody@127.0.0.1:1/none?sslmode=disable", "")
	dir := t.TempDir()
	key, vkey := keygen(t, audrey, filepath.Join(dir, "audit.key"))
	for range 5 {
		alice.ok(t, "dlq", "summary")
		alice.ok(t, "dlq", "list")
	}
	audrey.ok(t, "audit", "checkpoint", "--key", key)

	file := filepath.Join(dir, "summaries.evidence")
	audrey.ok(t, "audit", "export", "--action", "dlq.summary", "--out", file)
	r := offline.ok(t, "audit", "verify", "--file", file, "--verifier", vkey, "--complete")
	if !strings.Contains(r.stdout, `complete: the checkpoint counts 5 rows of action "dlq.summary" through seq`) {
		t.Errorf("a complete filtered export: %s", r)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var header map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &header); err != nil {
		t.Fatal(err)
	}
	// The third row withheld from the file and from its list.
	var withheld map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &withheld); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, s := range header["matched"].([]any) {
		if s != withheld["seq"] {
			kept = append(kept, s)
		}
	}
	// Edited as text: the header's first key is what marks the file as
	// evidence, and re-encoding a map would sort it elsewhere.
	matched, _ := json.Marshal(header["matched"])
	list, _ := json.Marshal(kept)
	edited := strings.Replace(lines[0], `"matched":`+string(matched), `"matched":`+string(list), 1)
	if edited == lines[0] {
		t.Fatalf("no matched list %s in the header %s", matched, lines[0])
	}
	cut := filepath.Join(dir, "cut.evidence")
	body := append([]string{edited}, append(lines[1:3:3], lines[4:]...)...)
	if err := os.WriteFile(cut, []byte(strings.Join(body, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := offline.exits(t, 7, "audit", "verify", "--file", cut, "--verifier", vkey); !strings.Contains(r.stderr, "(incomplete)") ||
		!strings.Contains(r.stderr, "1 row was withheld") {
		t.Errorf("a row withheld from a filtered export and its list: %s", r)
	}

	window := filepath.Join(dir, "window.evidence")
	audrey.ok(t, "audit", "export", "--action", "dlq.summary", "--since", "2000-01-01T00:00:00Z", "--out", window)
	if r := offline.ok(t, "audit", "verify", "--file", window, "--verifier", vkey); !strings.Contains(r.stdout, "not proved complete") {
		t.Errorf("a time window: %s", r)
	}
	if r := offline.exits(t, 7, "audit", "verify", "--file", window, "--verifier", vkey, "--complete"); !strings.Contains(r.stderr, "--complete") {
		t.Errorf("a time window under --complete: %s", r)
	}

	// A superuser deletes the second summary from the database, then
	// exports the action: the rows no longer give the signed counts.
	var second int64
	if err := json.Unmarshal([]byte(lines[2]), &withheld); err != nil {
		t.Fatal(err)
	}
	second = int64(withheld["seq"].(float64))
	if _, err := db.Superuser(t).Exec(withTimeout(t), fmt.Sprintf(`BEGIN;
		ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_no_delete;
		DELETE FROM expiryctl.audit_log WHERE seq = %d;
		ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_delete;
		COMMIT`, second)); err != nil {
		t.Fatal(err)
	}
	if r := audrey.exits(t, 7, "audit", "export", "--action", "dlq.summary", "--out", filepath.Join(dir, "after.evidence")); !strings.Contains(r.stderr, "checkpoint-mismatch") {
		t.Errorf("an export after a checkpointed row was deleted: %s", r)
	}
	if r := audrey.exits(t, 7, "audit", "verify"); !strings.Contains(r.stderr, "(gap)") {
		t.Errorf("the trail after a checkpointed row was deleted: %s", r)
	}
}
