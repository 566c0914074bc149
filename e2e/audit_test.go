package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// seedAuditRows appends n rows to the trail in one INSERT … SELECT that names
// seq and prev_hash, so that a few hundred thousand take seconds. Their links
// are not a valid chain (tests that export need volume, not validity); rows
// written after them chain to the last one.
func seedAuditRows(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := withTimeout(t)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_who_and_when`,
			`INSERT INTO expiryctl.audit_log (seq, at, actor, db_role, action, target, details, outcome, prev_hash)
			 SELECT g, now() - make_interval(secs => $1 - g), 'seed', 'root', 'dlq.list', 'dead_letter:' || g,
			        jsonb_build_object('limit', 50, 'returned', g % 50, 'filter', jsonb_build_object('search', 'r-' || g)),
			        'ok', sha256(int8send(g - 1))
			 FROM generate_series(1, $1::int) g`,
			`ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_who_and_when`,
		} {
			var args []any
			if strings.Contains(sql, "$1") {
				args = []any{n}
			}
			if _, err := tx.Exec(ctx, sql, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %d audit rows: %v", n, err)
	}
}

// requireAuditCommand fails the test with what to do when the binary was
// built without `expiryctl audit`.
func requireAuditCommand(t *testing.T, c *cli) {
	t.Helper()
	if r := c.run(t, "audit", "--help"); r.code != 0 || !strings.Contains(r.stdout, "verify") {
		t.Fatalf("the binary has no `audit` command (register commands.NewCmdAudit in commands/root.go): %s", r)
	}
}

// openFilesIn lists the files process pid holds open in dir, as
// /proc/PID/fd shows them (an unnamed O_TMPFILE shows as "dir/#123 (deleted)").
func openFilesIn(pid int, dir string) []string {
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, dir+"/") {
			open = append(open, "/proc/"+strconv.Itoa(pid)+"/fd/"+fd.Name())
		}
	}
	return open
}

// TestAuditExportKilled kills `audit export --out F` with SIGKILL while it
// writes and checks that nothing appears at F (a reviewer must never get a
// truncated trail that looks whole), that no stray temporary file is left
// unless named as partial, and that the attempt is nevertheless on record.
func TestAuditExportKilled(t *testing.T) {
	t.Parallel()
	const seeded = 300_000
	db := pgtest.New(t)
	c := newCLI(db.URL, "e2e-audit")
	requireAuditCommand(t, c)
	seedAuditRows(t, db.Pool, seeded)
	dir := t.TempDir()
	out := filepath.Join(dir, "trail.ndjson")

	p := c.start(t, "audit", "export", "--out", out)
	// Kill once the export is writing: its audit row exists and its
	// temporary file has data.
	waitFor(t, 30*time.Second, "the export to start writing", func() bool {
		if p.exited() {
			return true
		}
		for _, fd := range openFilesIn(p.cmd.Process.Pid, dir) {
			if fi, err := os.Stat(fd); err == nil && fi.Size() > 0 {
				return true
			}
		}
		return false
	})
	if p.exited() {
		t.Fatalf("the export of %d rows finished before it could be killed; seed more rows: %s", seeded, p.wait(time.Second))
	}
	p.signal(syscall.SIGKILL)
	if r := p.wait(10 * time.Second); r.code == 0 {
		t.Fatalf("the export was not killed: %s", r)
	}

	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a killed export left a file at --out (%v)", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.Contains(e.Name(), ".partial-") {
			t.Errorf("a killed export left %s, not named as partial", e.Name())
		} else {
			t.Logf("left behind, named as partial: %s", e.Name())
		}
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'audit.export'`); n != 1 {
		t.Fatalf("%d audit.export rows after the killed export, want 1: an export is recorded before it starts", n)
	}

	// Run to the end: the file is complete and ends with the export's own row.
	r := c.ok(t, "audit", "export", "--out", out)
	want := seeded + 2
	if !strings.HasPrefix(r.stderr, "exported "+strconv.Itoa(want)+" rows; chain head "+strconv.Itoa(want)+" ") {
		t.Fatalf("export summary: %s", r)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != want {
		t.Fatalf("the export has %d lines, want %d", lines, want)
	}
	last := data[strings.LastIndexByte(strings.TrimSuffix(string(data), "\n"), '\n')+1:]
	if !strings.Contains(string(last), `"action":"audit.export"`) || !strings.Contains(string(last), `"actor":"e2e-audit"`) {
		t.Fatalf("the export does not end with its own row: %s", last)
	}
}

// TestAuditVerifyOffline exports a real trail in every format, verifies the
// files with no database reachable, then shows that an edited file and a
// tampered database both fail verification naming the row.
func TestAuditVerifyOffline(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := newCLI(db.URL, "e2e-audit")
	requireAuditCommand(t, c)
	ctx := withTimeout(t)
	for i := 0; i < 30; i++ {
		err := audit.Record(ctx, db.Pool, audit.Entry{Actor: "alice", Action: "dlq.show", Target: "dead_letter:" + strconv.Itoa(i),
			Details: map[string]any{"payload_size": i, "note": "a,b \"c\"\nd é"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	offline := newCLI("postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "offline-reviewer")
	for _, format := range []string{"ndjson", "json", "csv"} {
		file := filepath.Join(dir, "trail."+format)
		r := c.ok(t, "audit", "export", "-o", format, "--out", file)
		fields := strings.Fields(strings.SplitN(r.stderr, "\n", 2)[0]) // exported N rows; chain head SEQ HASH
		anchor := fields[5] + ":" + fields[6]

		v := offline.ok(t, "audit", "verify", "--file", file, "--anchor", anchor)
		if !strings.HasPrefix(v.stdout, "verified "+fields[5]+" rows, head "+fields[5]+" "+fields[6]) {
			t.Fatalf("%s: %s", format, v)
		}

		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(data), "dead_letter:17", "dead_letter:71", 1)
		if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		// A broken chain has its own exit code, 7, so scripts can tell it
		// from any other failure.
		v = offline.run(t, "audit", "verify", "--file", file, "--anchor", anchor)
		if v.code != 7 || !strings.Contains(v.stderr, "first bad seq 18 (hash-mismatch)") {
			t.Fatalf("%s: an edited export: %s", format, v)
		}
	}

	if _, err := db.Pool.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_no_delete;
		DELETE FROM expiryctl.audit_log WHERE seq = 12;
		ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_delete`); err != nil {
		t.Fatal(err)
	}
	v := c.run(t, "audit", "verify")
	if v.code != 7 || !strings.Contains(v.stderr, "first bad seq 12 (gap)") {
		t.Fatalf("a deleted row: %s", v)
	}
	var outcome string
	if err := db.Pool.QueryRow(context.Background(), `SELECT outcome FROM expiryctl.audit_log WHERE action = 'audit.verify'
		ORDER BY seq DESC LIMIT 1`).Scan(&outcome); err != nil || outcome != "error" {
		t.Fatalf("the failed verification was recorded as %q (%v)", outcome, err)
	}
}
