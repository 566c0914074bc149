package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestAuditExportRun(t *testing.T) {
	t.Parallel()
	head := audit.Anchor{Seq: 9, Hash: audit.Hash{0x3f, 0x9a}}
	export := func(t *testing.T, exporter *fakes.Exporter, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdAuditExport(f, func(ctx context.Context, o *AuditExportOptions) error {
			o.Exporter = serve[service.AuditExporter](exporter)
			return auditExportRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	trail := func() *fakes.Exporter {
		return &fakes.Exporter{Recorder: fakes.Recorder{Actor: "reviewer"}, Content: "{\"seq\":1}\n",
			Result: audit.ExportResult{Rows: 9, Head: head}}
	}

	t.Run("the whole trail to stdout, recorded first, with its anchor", func(t *testing.T) {
		t.Parallel()
		x := trail()
		out, errOut, err := export(t, x)
		if err != nil {
			t.Fatal(err)
		}
		if out != x.Content {
			t.Fatalf("stdout %q", out)
		}
		if !strings.HasPrefix(errOut, "exported 9 rows; chain head 9 "+head.Hash.String()+"\n") ||
			!strings.Contains(errOut, "keep the anchor "+head.String()+" apart from the file: `expiryctl audit verify --file FILE --anchor "+head.String()+"`") {
			t.Fatalf("stderr %q", errOut)
		}
		entries := x.Recorded()
		if len(entries) != 1 || entries[0].Action != "audit.export" || entries[0].Actor != "reviewer" || entries[0].Outcome != audit.OK {
			t.Fatalf("recorded %+v", entries)
		}
		if d := entries[0].Details.(map[string]any); d["out"] != "stdout" || d["format"] != audit.NDJSON {
			t.Fatalf("details %v", d)
		}
		// The export ends with its own row.
		if len(x.Exports) != 1 || x.Exports[0].Filter.ThroughSeq != 1 || x.Exports[0].Format != audit.NDJSON {
			t.Fatalf("exports %+v", x.Exports)
		}
	})
	t.Run("a filter without a checkpoint is a plain export with gaps", func(t *testing.T) {
		t.Parallel()
		_, errOut, err := export(t, trail(), "--action", "dlq.show")
		if err != nil || !strings.Contains(errOut, "filtered: the rows in between are left out, so verify it with --allow-gaps") {
			t.Fatalf("export = %v, stderr %q", err, errOut)
		}
	})
	t.Run("a filter with a checkpoint is evidence by default", func(t *testing.T) {
		t.Parallel()
		x := trail()
		x.Format = audit.Evidence
		x.Evidence = audit.EvidenceResult{Rows: 4, Proved: 3, Checkpoint: audit.Checkpoint{TreeHead: audit.TreeHead{Size: 8}}}
		path := filepath.Join(t.TempDir(), "request-7.evidence")
		_, errOut, err := export(t, x, "--target", "replay_request:7", "--out", path)
		if err != nil {
			t.Fatal(err)
		}
		if x.Exports[0].Format != audit.Evidence || x.Exports[0].Filter.Target != "replay_request:7" {
			t.Fatalf("exports %+v", x.Exports)
		}
		if want := "exported 4 rows as evidence: 3 with inclusion proofs in the checkpoint of 8 rows, 1 newer than it; " +
			"`expiryctl audit verify --file " + path + " --verifier KEY` checks it with no database\n"; errOut != want {
			t.Fatalf("stderr %q", errOut)
		}
		if data, err := os.ReadFile(path); err != nil || string(data) != x.Content {
			t.Fatalf("file %q (%v)", data, err)
		}
		if d := x.Recorded()[0].Details.(map[string]any); d["out"] != path {
			t.Fatalf("recorded out %v, want the absolute path", d["out"])
		}
	})
	t.Run("a chosen format is kept", func(t *testing.T) {
		t.Parallel()
		x := trail()
		x.Format = audit.Evidence
		if _, _, err := export(t, x, "--target", "replay_request:7", "-o", "csv"); err != nil || x.Exports[0].Format != audit.CSV {
			t.Fatalf("export = %v, %+v", err, x.Exports)
		}
	})
	t.Run("--format, the old name of -o, still works", func(t *testing.T) {
		t.Parallel()
		x := trail()
		x.Format = audit.Evidence
		if _, _, err := export(t, x, "--target", "replay_request:7", "--format", "csv"); err != nil || x.Exports[0].Format != audit.CSV {
			t.Fatalf("export = %v, %+v", err, x.Exports)
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		t.Parallel()
		x := trail()
		x.Result = audit.ExportResult{}
		_, errOut, err := export(t, x, "--actor", "nobody")
		if err != nil || errOut != "exported 0 rows: nothing matches\n" {
			t.Fatalf("export = %v, stderr %q", err, errOut)
		}
	})
	t.Run("a failed export is recorded as failed", func(t *testing.T) {
		t.Parallel()
		x := trail()
		x.Err = errors.New("connection reset")
		path := filepath.Join(t.TempDir(), "trail.ndjson")
		_, _, err := export(t, x, "--out", path)
		if err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("error = %v", err)
		}
		entries := x.Recorded()
		if len(entries) != 2 || entries[1].Outcome != audit.Failed {
			t.Fatalf("recorded %+v, want the export and its failure", entries)
		}
		if d := entries[1].Details.(map[string]any); d["error"] == nil || d["export_seq"] != int64(1) {
			t.Fatalf("failure details %v", d)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("a failed export left %s (%v)", path, err)
		}
	})
	t.Run("an unwritable --out is refused before it is recorded", func(t *testing.T) {
		t.Parallel()
		x := trail()
		_, _, err := export(t, x, "--out", filepath.Join(t.TempDir(), "no", "dir", "x.ndjson"))
		if err == nil || !strings.Contains(err.Error(), "cannot write --out") || len(x.Recorded()) != 0 {
			t.Fatalf("error = %v after %d records", err, len(x.Recorded()))
		}
	})
}
