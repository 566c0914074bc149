package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func runCmd(cmd *cobra.Command, args ...string) error {
	return runCmdContext(context.Background(), cmd, args...)
}

// runCmdContext runs cmd with args under ctx, flag errors typed as Main
// types them.
func runCmdContext(ctx context.Context, cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &FlagError{Err: err} })
	return cmd.ExecuteContext(ctx)
}

func TestAuditFlags(t *testing.T) {
	t.Parallel()
	type build func(f *Factory, ran *bool) *cobra.Command
	list := func(check func(*testing.T, *AuditListOptions)) build {
		return func(f *Factory, ran *bool) *cobra.Command {
			return NewCmdAuditList(f, func(_ context.Context, o *AuditListOptions) error {
				*ran = true
				if check != nil {
					check(t, o)
				}
				return nil
			})
		}
	}
	export := func(check func(*testing.T, *AuditExportOptions)) build {
		return func(f *Factory, ran *bool) *cobra.Command {
			return NewCmdAuditExport(f, func(_ context.Context, o *AuditExportOptions) error {
				*ran = true
				if check != nil {
					check(t, o)
				}
				return nil
			})
		}
	}
	verify := func(check func(*testing.T, *AuditVerifyOptions)) build {
		return func(f *Factory, ran *bool) *cobra.Command {
			return NewCmdAuditVerify(f, func(_ context.Context, o *AuditVerifyOptions) error {
				*ran = true
				if check != nil {
					check(t, o)
				}
				return nil
			})
		}
	}
	const hash = "9d3dcde986e305427a7f96d76458d7b084e8dacbf90cad4a824c877ce9cc0212"
	cases := []struct {
		name    string
		cmd     build
		args    []string
		tty     bool
		wantErr string
	}{
		{name: "list defaults", cmd: list(func(t *testing.T, o *AuditListOptions) {
			if o.Limit != 50 || o.Output.value != "table" || o.Cursor != nil || !o.Filter.IsZero() {
				t.Errorf("defaults = %+v", o)
			}
		})},
		{name: "list filters", args: []string{"--since", "2h", "--actor", "alice", "--action", "dlq.show", "--target", "dead_letter:4", "--after", "77", "-o", "json"},
			cmd: list(func(t *testing.T, o *AuditListOptions) {
				if o.Filter.Actor != "alice" || o.Filter.Action != "dlq.show" || o.Filter.Target != "dead_letter:4" ||
					o.Filter.Since.Hour() != 1 || o.Cursor.Seq != 77 || o.Output.value != "json" {
					t.Errorf("options = %+v, filter %+v", o, o.Filter)
				}
			})},
		{name: "list bad limit", cmd: list(nil), args: []string{"--limit", "0"}, wantErr: "use 1 to 10000"},
		{name: "list bad cursor", cmd: list(nil), args: []string{"--after", "abc"}, wantErr: "invalid cursor"},
		{name: "list bad time", cmd: list(nil), args: []string{"--since", "yesterday"}, wantErr: "use an RFC 3339 time"},
		{name: "list empty window", cmd: list(nil), args: []string{"--since", "1h", "--until", "2h"}, wantErr: "is not before --until"},
		{name: "list takes csv", cmd: list(func(t *testing.T, o *AuditListOptions) {
			if o.Output.value != "csv" {
				t.Errorf("-o csv = %q", o.Output.value)
			}
		}), args: []string{"-o", "csv"}},
		{name: "list yaml is not offered", cmd: list(nil), args: []string{"-o", "yaml"}, wantErr: "use table, json or csv"},
		{name: "export defaults", cmd: export(func(t *testing.T, o *AuditExportOptions) {
			if o.Format != audit.NDJSON || o.Out != "" {
				t.Errorf("defaults = %+v", o)
			}
		})},
		{name: "export csv to a file on a terminal", tty: true, args: []string{"-o", "csv", "--out", "x.csv"},
			cmd: export(func(t *testing.T, o *AuditExportOptions) {
				if o.Format != audit.CSV || o.Out != "x.csv" {
					t.Errorf("options = %+v", o)
				}
			})},
		{name: "export refuses a terminal", cmd: export(nil), tty: true, wantErr: "pass --out FILE or redirect stdout"},
		{name: "export bad format", cmd: export(nil), args: []string{"-o", "xml"}, wantErr: "use ndjson, json or csv"},
		{name: "verify anchor", args: []string{"--anchor", "42:" + hash, "--from", "40"}, cmd: verify(func(t *testing.T, o *AuditVerifyOptions) {
			if o.Anchor == nil || o.Anchor.Seq != 42 || o.Anchor.Hash.String() != hash || o.From != 40 {
				t.Errorf("options = %+v", o)
			}
		})},
		{name: "verify bad anchor", cmd: verify(nil), args: []string{"--anchor", "42"}, wantErr: "use SEQ:HASH"},
		{name: "verify gaps need a file", cmd: verify(nil), args: []string{"--allow-gaps"}, wantErr: "--allow-gaps is for --file"},
		{name: "verify negative from", cmd: verify(nil), args: []string{"--from", "-1"}, wantErr: "use a seq"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			f.IO.StdoutTTY = c.tty
			var ran bool
			err := runCmd(c.cmd(f, &ran), c.args...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				if ExitCode(err) != ExitUsage {
					t.Fatalf("exit code %d, want %d", ExitCode(err), ExitUsage)
				}
				if ran {
					t.Fatal("ran despite the flag error")
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("error = %v, ran = %v", err, ran)
			}
		})
	}
}

// auditFactory is a Factory on db whose streams are buffers.
func auditFactory(t *testing.T, db *pgtest.Database, actor string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	f, out, errOut := testFactory(t)
	f.DatabaseURLFlag = db.URL
	f.Getenv = func(k string) string {
		if k == "EXPIRYCTL_ACTOR" {
			return actor
		}
		return ""
	}
	t.Cleanup(f.Close)
	return f, out, errOut
}

func lastAuditRow(t *testing.T, db *pgtest.Database) (action, actor, outcome string, details map[string]any) {
	t.Helper()
	var raw []byte
	err := db.Pool.QueryRow(context.Background(), `SELECT action, actor, outcome, details FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1`).
		Scan(&action, &actor, &outcome, &raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &details); err != nil {
		t.Fatal(err)
	}
	return action, actor, outcome, details
}

// TestAuditCommands runs list, export and verify against a real database the
// way an operator would, and checks what each prints and records.
func TestAuditCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	for i := 0; i < 7; i++ {
		if err := audit.Record(ctx, db.Pool, audit.Entry{Actor: "alice", Action: "dlq.show", Target: "dead_letter:1",
			Details: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}

	// list: newest first, a page, the cursor on stderr, its own row after.
	f, out, errOut := auditFactory(t, db, "reviewer")
	if err := runCmd(NewCmdAudit(f), "list", "--limit", "3", "--actor", "alice"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ\tAT\tACTOR") || !strings.HasPrefix(lines[1], "7\t") {
		t.Fatalf("list printed:\n%s", out)
	}
	if withoutAdvisory(errOut.String()) != "next page: --after 5\n" {
		t.Fatalf("list stderr %q", errOut)
	}
	action, actor, outcome, details := lastAuditRow(t, db)
	if action != "audit.list" || actor != "reviewer" || outcome != "ok" || details["returned"] != 3.0 {
		t.Fatalf("list recorded %s by %s (%s) %v", action, actor, outcome, details)
	}

	// export to a file: complete, private, ending with its own row.
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.ndjson")
	f, _, errOut = auditFactory(t, db, "reviewer")
	if err := runCmd(NewCmdAudit(f), "export", "--out", path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(rows) != 9 || !strings.Contains(rows[8], `"action":"audit.export"`) {
		t.Fatalf("export has %d rows, last %s", len(rows), rows[len(rows)-1])
	}
	if !strings.HasPrefix(withoutAdvisory(errOut.String()), "exported 9 rows; chain head 9 ") {
		t.Fatalf("export stderr %q", errOut)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export file mode %v, %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the export directory holds %d entries, want only the export", len(entries))
	}
	anchor := strings.Fields(withoutAdvisory(errOut.String()))[5] + ":" + strings.Fields(withoutAdvisory(errOut.String()))[6]

	// export again over the same file: replaced whole.
	f, _, _ = auditFactory(t, db, "reviewer")
	if err := runCmd(NewCmdAudit(f), "export", "-o", "csv", "--out", path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !bytes.HasPrefix(data, []byte("seq,at,actor")) {
		t.Fatalf("second export did not replace the file: %.40q", data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the export directory holds %d entries after a replace", len(entries))
	}

	// verify the database, with the anchor from the first export.
	f, out, _ = auditFactory(t, db, "reviewer")
	if err := runCmd(NewCmdAudit(f), "verify", "--anchor", anchor); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "verified 10 rows, head 10 ") {
		t.Fatalf("verify printed %q", out)
	}
	action, _, outcome, details = lastAuditRow(t, db)
	if action != "audit.verify" || outcome != "ok" || details["intact"] != true || details["rows"] != 10.0 {
		t.Fatalf("verify recorded %s (%s) %v", action, outcome, details)
	}

	// verify the file with no database at all: the URL points nowhere.
	f, out, _ = testFactory(t)
	f.DatabaseURLFlag = "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"
	if err := runCmd(NewCmdAudit(f), "verify", "--file", path, "--anchor", anchor); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "verified 10 rows, head 10 ") {
		t.Fatalf("verify --file printed %q", out)
	}
	if f.pool != nil {
		t.Fatal("verify --file opened a database connection")
	}

	// tamper, then verify: a ChainError naming the row after the edited one
	// (the database re-hashed the edited row), and a record of it.
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE expiryctl.audit_log DISABLE TRIGGER audit_log_no_update;
		UPDATE expiryctl.audit_log SET actor = 'mallory' WHERE seq = 4;
		ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	f, out, errOut = auditFactory(t, db, "reviewer")
	err = runCmd(NewCmdAudit(f), "verify")
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Seq != 5 || chainErr.Problem != audit.BrokenLink {
		t.Fatalf("verify after tampering: %v", err)
	}
	if out.Len() != 0 || !strings.Contains(withoutAdvisory(errOut.String()), "at or after seq 5") {
		t.Fatalf("verify after tampering printed %q / %q", out, errOut)
	}
	action, _, outcome, details = lastAuditRow(t, db)
	if action != "audit.verify" || outcome != "error" || details["intact"] != false || details["first_bad_seq"] != 5.0 {
		t.Fatalf("failed verify recorded %s (%s) %v", action, outcome, details)
	}
}

func TestAuditExportToStdoutAndUnwritableOut(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	f, out, errOut := auditFactory(t, db, "reviewer")
	if err := runCmd(NewCmdAudit(f), "export", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0]["action"] != "audit.export" || rows[0]["seq"] != 1.0 {
		t.Fatalf("exported %v", rows)
	}
	if !strings.HasPrefix(withoutAdvisory(errOut.String()), "exported 1 row; chain head 1 ") {
		t.Fatalf("stderr %q", errOut)
	}

	f, _, _ = auditFactory(t, db, "reviewer")
	err := runCmd(NewCmdAudit(f), "export", "--out", filepath.Join(t.TempDir(), "no", "such", "dir", "x.ndjson"))
	if err == nil || !strings.Contains(err.Error(), "cannot write --out") {
		t.Fatalf("unwritable --out: %v", err)
	}
	if action, _, _, _ := lastAuditRow(t, db); action != "audit.export" {
		t.Fatalf("last row %s", action)
	}
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'audit.export'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("an export refused for its --out was recorded (%d export rows, %v)", n, err)
	}
}

// withoutAdvisory drops the line a superuser's connection prints to say
// governance is advisory for it: these tests connect as the test server's
// superuser.
func withoutAdvisory(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "warning: ") || !strings.Contains(line, "governance is advisory") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}
