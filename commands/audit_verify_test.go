package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/reconcile"
)

func TestAuditVerifyRun(t *testing.T) {
	t.Parallel()
	head := audit.Anchor{Seq: 10, Hash: audit.Hash{0x3f, 0x9a}}
	intact := func() *fakes.Reviewer {
		return &fakes.Reviewer{Result: audit.Result{Rows: 10, From: 1, Head: head}}
	}
	verify := func(t *testing.T, reviewer *fakes.Reviewer, reconciler *fakes.Reconciler, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdAuditVerify(f, func(ctx context.Context, o *AuditVerifyOptions) error {
			o.Reviewer, o.Reconciler = never[service.AuditReviewer](t, "the database"), never[service.Reconciler](t, "reconciliation")
			if reviewer != nil {
				o.Reviewer = serve[service.AuditReviewer](reviewer)
			}
			if reconciler != nil {
				o.Reconciler = serve[service.Reconciler](reconciler)
			}
			return auditVerifyRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}

	t.Run("the database's chain", func(t *testing.T) {
		t.Parallel()
		reviewer := intact()
		out, errOut, err := verify(t, reviewer, nil, "--from", "4")
		if err != nil || out != "verified 10 rows, head 10 "+head.Hash.String()+"\n" || errOut != "" {
			t.Fatalf("verify = %v, %q, %q", err, out, errOut)
		}
		if len(reviewer.Verifies) != 1 || reviewer.Verifies[0] != 4 {
			t.Fatalf("verified from %v, want 4", reviewer.Verifies)
		}
		out, _, err = verify(t, intact(), nil, "-o", "json")
		var report verifyReport
		if err != nil || json.Unmarshal([]byte(out), &report) != nil || report.Source != "database" || report.Rows != 10 ||
			report.HeadHash != head.Hash.String() {
			t.Fatalf("json = %+v, %v", report, err)
		}
	})
	t.Run("a broken chain exits 7 and says what to do", func(t *testing.T) {
		t.Parallel()
		reviewer := intact()
		reviewer.VerifyErr = &audit.ChainError{Seq: 5, Problem: audit.BrokenLink, Detail: "prev_hash does not match", Source: "database"}
		out, errOut, err := verify(t, reviewer, nil)
		wantExit(t, err, ExitTampered)
		if out != "" || !strings.Contains(errOut, "changed outside expiryctl at or after seq 5") {
			t.Fatalf("stdout %q, stderr %q", out, errOut)
		}
	})
	t.Run("reconcile after the chain", func(t *testing.T) {
		t.Parallel()
		out, _, err := verify(t, intact(), &fakes.Reconciler{Report: reconcile.Report{Requests: 3, Events: 20}}, "--reconcile")
		if err != nil || !strings.HasSuffix(out, "\nreconciled 3 requests and the policy with 20 governance events: every state has an event behind it\n") {
			t.Fatalf("reconcile = %v:\n%s", err, out)
		}
	})
	t.Run("a reconciliation mismatch lists the findings and exits 7", func(t *testing.T) {
		t.Parallel()
		mismatch := &reconcile.MismatchError{Findings: []reconcile.Finding{
			{Table: "replay_requests", Key: "7", Column: "status", Detail: "approved with no approval event"}}}
		out, errOut, err := verify(t, intact(), &fakes.Reconciler{Err: mismatch}, "--reconcile")
		wantExit(t, err, ExitTampered)
		if !strings.HasSuffix(out, "TABLE\tKEY\tCOLUMN\tFINDING\nreplay_requests\t7\tstatus\tapproved with no approval event\n") ||
			!strings.Contains(errOut, "1 governance states have no event behind them") {
			t.Fatalf("stdout %q, stderr %q", out, errOut)
		}
	})

	// A checkpoint signed here, verified by the fake reviewer: the command's
	// part is reading and opening it and printing what was proved.
	dir := t.TempDir()
	skey, vkey, err := audit.GenerateKey("test-audit")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(&note.Note{Text: "expiryctl/test\n8\n" + tlog.Hash{1}.String() + "\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint, vkeyFile := filepath.Join(dir, "checkpoint.txt"), filepath.Join(dir, "audit.vkey")
	if err := os.WriteFile(checkpoint, signed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vkeyFile, []byte(vkey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("the trail extends a signed checkpoint", func(t *testing.T) {
		t.Parallel()
		reviewer := intact()
		reviewer.Extended = audit.Consistency{Size: 10, Root: tlog.Hash{2}}
		out, _, err := verify(t, reviewer, nil, "--checkpoint", checkpoint, "--verifier", vkeyFile)
		if err != nil {
			t.Fatal(err)
		}
		if len(reviewer.Checkpoints) != 1 || reviewer.Checkpoints[0].Size != 8 || reviewer.Checkpoints[0].Signer != "test-audit" {
			t.Fatalf("verified against %+v", reviewer.Checkpoints)
		}
		want := "verified 10 rows, head 10 " + head.Hash.String() + "; they extend the checkpoint of 8 rows signed by " + audit.KeyLabel("test-audit", signer.KeyHash()) + "; tree root now " + tlog.Hash{2}.String() + "\n"
		if out != want {
			t.Fatalf("stdout %q, want %q", out, want)
		}
	})
	t.Run("a checkpoint signed by another key fails the verification, naming both keys", func(t *testing.T) {
		t.Parallel()
		_, other, _ := audit.GenerateKey("other")
		_, _, err := verify(t, nil, nil, "--checkpoint", checkpoint, "--verifier", other)
		wantExit(t, err, ExitTampered)
		if !strings.Contains(err.Error(), "not signed by other (key ") || !strings.Contains(err.Error(), "signature of test-audit (key ") {
			t.Fatalf("error %q does not name both keys by name and hash", err)
		}
	})
	t.Run("a verifier key that does not parse is a usage error", func(t *testing.T) {
		t.Parallel()
		_, _, err := verify(t, nil, nil, "--checkpoint", checkpoint, "--verifier", "not-a-key")
		wantExit(t, err, ExitUsage)
	})
	t.Run("a forged checkpoint fails the verification", func(t *testing.T) {
		t.Parallel()
		forged := filepath.Join(t.TempDir(), "forged.txt")
		data, _ := os.ReadFile(checkpoint)
		if err := os.WriteFile(forged, bytes.Replace(data, []byte("\n8\n"), []byte("\n9\n"), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := verify(t, nil, nil, "--checkpoint", forged, "--verifier", vkey)
		wantExit(t, err, ExitTampered)
	})
	t.Run("a file needs no database", func(t *testing.T) {
		t.Parallel()
		empty := filepath.Join(t.TempDir(), "trail.ndjson")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := verify(t, nil, nil, "--file", empty)
		if err != nil || out != "verified 0 rows: "+empty+" has none\n" {
			t.Fatalf("verify --file = %v, %q", err, out)
		}
		_, _, err = verify(t, nil, nil, "--file", empty, "--verifier", vkey)
		wantExit(t, err, ExitUsage)
	})
}

func TestAuditKeygenRun(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.key")
	keygen := func() (string, string, error) {
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdAuditKeygen(f, nil), "--out", path, "--name", "payments-audit")
		return out.String(), errOut.String(), err
	}
	out, errOut, err := keygen()
	if err != nil {
		t.Fatal(err)
	}
	skey, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode())
	}
	if _, err := note.NewSigner(strings.TrimSpace(string(skey))); err != nil {
		t.Fatalf("the key file holds no signing key: %v", err)
	}
	if v, err := note.NewVerifier(strings.TrimSpace(out)); err != nil || v.Name() != "payments-audit" {
		t.Fatalf("stdout %q is not the verifier key (%v)", out, err)
	}
	if !strings.Contains(errOut, "wrote the signing key to "+path) {
		t.Fatalf("stderr %q", errOut)
	}
	_, _, err = keygen()
	wantExit(t, err, ExitUsage)
	if again, _ := os.ReadFile(path); string(again) != string(skey) {
		t.Fatal("keygen overwrote a key")
	}
}

func TestAuditCheckpointRun(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "audit.key")
	if err := os.WriteFile(key, []byte("PRIVATE+KEY+test"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := audit.Checkpoint{TreeHead: audit.TreeHead{Origin: "expiryctl/test", Size: 8, Root: tlog.Hash{1}}, Note: []byte("signed note\n"), Signer: "test-audit"}
	checkpoint := func(t *testing.T, signer service.AuditSigner, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdAuditCheckpoint(f, func(ctx context.Context, o *AuditCheckpointOptions) error {
			o.Signer = serve(signer)
			return auditCheckpointRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	t.Run("to stdout", func(t *testing.T) {
		t.Parallel()
		s := &fakes.Signer{Checkpoint: cp}
		out, errOut, err := checkpoint(t, s, "--key", key)
		root := tlog.Hash{1}
		if err != nil || out != "signed note\n" || errOut != "signed checkpoint of 8 rows by test-audit (key 00000000), root "+root.String()+"\n" {
			t.Fatalf("checkpoint = %v, %q, %q", err, out, errOut)
		}
		if keys, _ := s.Calls(); len(keys) != 1 || keys[0] != "PRIVATE+KEY+test" {
			t.Fatalf("signed with %v", keys)
		}
	})
	t.Run("to a file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "checkpoint.txt")
		out, _, err := checkpoint(t, &fakes.Signer{Checkpoint: cp}, "--key", key, "--out", path)
		if data, _ := os.ReadFile(path); err != nil || out != "" || string(data) != "signed note\n" {
			t.Fatalf("checkpoint = %v, stdout %q, file %q", err, out, data)
		}
	})
	t.Run("an unreadable key asks nothing of the database", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdAuditCheckpoint(f, func(ctx context.Context, o *AuditCheckpointOptions) error {
			o.Signer = never[service.AuditSigner](t, "the signer")
			return auditCheckpointRun(ctx, o)
		}), "--key", filepath.Join(t.TempDir(), "none"))
		if err == nil || !strings.Contains(err.Error(), "cannot read --key") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("key is required", func(t *testing.T) {
		t.Parallel()
		_, _, err := checkpoint(t, &fakes.Signer{}, "--out", "x")
		wantExit(t, err, ExitUsage)
	})
	t.Run("a signer keeps each checkpoint in its directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s := &fakes.Signer{Checkpoint: cp}
		_, errOut, err := checkpoint(t, s, "--key", key, "--every", "5m", "--out-dir", dir)
		if data, _ := os.ReadFile(filepath.Join(dir, "checkpoint-8.txt")); err != nil || string(data) != "signed note\n" {
			t.Fatalf("checkpoint --every = %v, file %q, stderr %q", err, data, errOut)
		}
		if _, every := s.Calls(); len(every) != 1 || every[0] != 5*time.Minute {
			t.Fatalf("SignEvery intervals %v, want one of 5m", every)
		}
	})
	t.Run("a signer's flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"--key", key, "--every", "5m", "--out", "x"},
			{"--key", key, "--every", "10ms", "--out-dir", "d"},
			{"--key", key, "--out", "x", "--out-dir", "d"},
		} {
			_, _, err := checkpoint(t, &fakes.Signer{Checkpoint: cp}, args...)
			wantExit(t, err, ExitUsage)
		}
	})
}
