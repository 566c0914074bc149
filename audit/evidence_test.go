package audit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// evidenceFile is a filtered export (action dlq.show) of a trail of 30
// checkpointed rows and 5 newer ones, and the key that checks it.
func evidenceFile(t *testing.T) ([]byte, string) {
	t.Helper()
	db, _, vkey := checkpointed(t, 30)
	file, res := exportDLQShows(t, db)
	// seedRow gives dlq.show to seq ≡ 1 (mod 5): 1, 6, …, 26 proved, 36
	// not yet (the checkpoint's own row is 31).
	if res.Rows != 7 || res.Proved != 6 {
		t.Fatalf("exported %d rows, %d proved; want 7 and 6\n%s", res.Rows, res.Proved, file)
	}
	return file, vkey
}

func exportDLQShows(t *testing.T, db *pgtest.Database) ([]byte, audit.EvidenceResult) {
	t.Helper()
	seedChain(t, db.Pool, 5)
	var buf bytes.Buffer
	res, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, audit.Filter{Action: "dlq.show"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res
}

func TestEvidenceVerifiesOffline(t *testing.T) {
	t.Parallel()
	file, vkey := evidenceFile(t)
	res, err := audit.VerifyEvidence(context.Background(), bytes.NewReader(file), "request-7.evidence", vkey)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 7 || res.Proved != 6 || res.Checkpoint.Size != 30 {
		t.Errorf("verified %+v, want 7 rows, 6 proved in the checkpoint of 30", res)
	}
}

func TestEvidenceCatchesTampering(t *testing.T) {
	t.Parallel()
	file, vkey := evidenceFile(t)
	// Another trail: the same rows, but for a first row of its own, so
	// that every hash after it differs.
	otherDB := pgtest.New(t)
	if err := audit.Record(context.Background(), otherDB.Pool, audit.Entry{Actor: "someone", Action: "dlq.summary", Details: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	seedChain(t, otherDB.Pool, 29)
	skey, _, _ := audit.GenerateKey("other")
	if _, err := audit.SignCheckpoint(context.Background(), otherDB.Pool, "audrey", skey); err != nil {
		t.Fatal(err)
	}
	other, _ := exportDLQShows(t, otherDB)
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	otherLines := strings.Split(strings.TrimSuffix(string(other), "\n"), "\n")
	edit := func(i int, f func(map[string]any)) []string {
		var row map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &row); err != nil {
			t.Fatal(err)
		}
		f(row)
		b, _ := json.Marshal(row)
		out := append([]string(nil), lines...)
		out[i] = string(b)
		return out
	}
	_, strangerKey, _ := audit.GenerateKey("stranger")
	cases := []struct {
		name    string
		lines   []string
		key     string
		wantSeq int64
		want    audit.Problem
	}{
		{"a field changed", edit(2, func(r map[string]any) { r["actor"] = "mallory" }), vkey, 6, audit.HashMismatch},
		{"a field changed and the hash recomputed", edit(2, func(r map[string]any) {
			r["actor"] = "mallory"
			r["hash"] = rehash(t, r)
		}), vkey, 6, audit.InclusionFailed},
		{"a row removed", append(append([]string(nil), lines[:3]...), lines[4:]...), vkey, 11, audit.Gap},
		{"a row of another trail", append(append([]string(nil), lines[:2]...), append([]string{otherLines[2]}, lines[3:]...)...), vkey, 11, audit.InclusionFailed},
		{"a checkpoint signed by another key", lines, strangerKey, 0, audit.CheckpointSignature},
		{"a proof for a row the checkpoint does not cover", edit(7, func(r map[string]any) { r["proof"] = "" }), vkey, 36, audit.Malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(c.lines, "\n")+"\n"), "f", c.key)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) || chainErr.Problem != c.want || chainErr.Seq != c.wantSeq {
				t.Fatalf("VerifyEvidence = %v, want %s at seq %d", err, c.want, c.wantSeq)
			}
			t.Log(err)
		})
	}
}

// rehash recomputes an exported row's hash from its fields, as someone
// forging a row would.
func rehash(t *testing.T, r map[string]any) string {
	t.Helper()
	prev, err := audit.ParseHash(r["prev_hash"].(string))
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse("2006-01-02T15:04:05.000000Z", r["at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	fields := audit.ChainFields{Seq: int64(r["seq"].(float64)), AtMicros: at.UnixMicro(), Actor: r["actor"].(string), DBRole: r["db_role"].(string),
		Action: r["action"].(string), Target: r["target"].(string), Details: r["details"].(string), Outcome: r["outcome"].(string), PrevHash: prev}
	return fields.ComputeHash().String()
}

func FuzzVerifyEvidence(f *testing.F) {
	key, vkey, err := audit.GenerateKey("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	_ = key
	f.Add([]byte(`{"expiryctl_audit_evidence":1,"origin":"o","checkpoint":"","filter":{},"matched":[1]}` + "\n" + `{"seq":1}`))
	f.Add([]byte("{\"expiryctl_audit_evidence\":1}\n\n\n{}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := audit.VerifyEvidence(context.Background(), bytes.NewReader(b), "fuzz", vkey)
		if err == nil && res.Proved > res.Rows {
			t.Fatalf("proved %d of %d rows", res.Proved, res.Rows)
		}
		if err == nil && res.Proved > 0 {
			t.Fatalf("a file no key of this test signed proved %d rows", res.Proved)
		}
	})
}

// TestWholeEvidenceIsProvedByItsRoot: an evidence export of every row is
// proved by recomputing the checkpoint's root from its rows, which catches
// a row changed with its hash recomputed as the proofs would.
func TestWholeEvidenceIsProvedByItsRoot(t *testing.T) {
	t.Parallel()
	db, _, vkey := checkpointed(t, 30)
	var buf bytes.Buffer
	if _, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	res, err := audit.VerifyEvidence(context.Background(), bytes.NewReader(buf.Bytes()), "all", vkey)
	if err != nil || res.Rows != 31 || res.Proved != 30 {
		t.Fatalf("VerifyEvidence = %+v, %v; want 31 rows, 30 proved", res, err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[12]), &row); err != nil {
		t.Fatal(err)
	}
	row["target"] = "dead_letter:666"
	row["hash"] = rehash(t, row)
	edited, _ := json.Marshal(row)
	lines[12] = string(edited)
	_, err = audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(lines, "\n")), "all", vkey)
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.InclusionFailed {
		t.Fatalf("a rewritten row in a whole export: %v, want %s", err, audit.InclusionFailed)
	}
}

// TestLargeEvidenceIsProvedInParallelInOrder: an export large enough to
// prove its rows on several goroutines writes them in seq order, each with
// a proof that checks on its own.
func TestLargeEvidenceIsProvedInParallelInOrder(t *testing.T) {
	t.Parallel()
	db, cp, vkey := checkpointed(t, 3000)
	var buf bytes.Buffer
	// A filter that keeps every row, so that each carries its proof.
	res, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, audit.Filter{ThroughSeq: cp.Size, Since: time.Unix(0, 0).UTC()})
	if err != nil || res.Rows != cp.Size || res.Proved != cp.Size {
		t.Fatalf("ExportEvidence = %+v, %v; want %d rows proved", res, err, cp.Size)
	}
	if _, err := audit.VerifyEvidence(context.Background(), bytes.NewReader(buf.Bytes()), "large", vkey); err != nil {
		t.Fatal(err)
	}
	// Without its last row, the header still lists it.
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	_, err = audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(lines[:len(lines)-1], "\n")), "large", vkey)
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.Gap || chainErr.Seq != cp.Size {
		t.Fatalf("the export without its last row: %v, want a gap at seq %d", err, cp.Size)
	}
}

// TestWholeEvidenceIsCompleteOrRefused: a whole-trail evidence file holds
// every seq from 1 through its end, each once and no other, and every proof
// it carries is checked; a file relabelled as filtered has no proofs to
// show for its rows.
func TestWholeEvidenceIsCompleteOrRefused(t *testing.T) {
	t.Parallel()
	db, _, vkey := checkpointed(t, 30)
	var buf bytes.Buffer
	if _, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 32 || strings.Contains(buf.String(), `"proof"`) {
		t.Fatalf("a whole export of 31 rows: %d lines, proofs %v; want 32 lines and no proofs", len(lines), strings.Contains(buf.String(), `"proof"`))
	}
	header := func(f func(map[string]any)) string { return editedHeader(t, lines[0], f) }
	without := func(i int) []string { return append(append([]string(nil), lines[:i]...), lines[i+1:]...) }
	withHeader := func(h string, rows []string) []string { return append([]string{h}, rows[1:]...) }
	withProof := func(i int, proof string) []string {
		out := append([]string(nil), lines...)
		out[i] = strings.TrimSuffix(out[i], "}") + `,"proof":"` + proof + `"}`
		return out
	}
	zeros := base64.StdEncoding.EncodeToString(make([]byte, 5*32))
	extra := strings.Replace(lines[31], `"seq":31`, `"seq":32`, 1)
	cases := []struct {
		name    string
		lines   []string
		wantSeq int64
		want    audit.Problem
	}{
		{"a row taken out of the file and its list", withHeader(header(unlisted(7)), without(7)), 7, audit.Gap},
		{"a row taken out of the file only", without(7), 7, audit.Gap},
		{"the rows after 20 taken out with their list", withHeader(header(func(h map[string]any) {
			h["matched"] = h["matched"].([]any)[:20]
		}), lines[:21]), 21, audit.Gap},
		{"a row twice", append(append([]string(nil), lines...), lines[7]), 7, audit.DuplicateSeq},
		{"a row the list does not hold", append(append([]string(nil), lines...), extra), 32, audit.Malformed},
		{"a garbage proof", withProof(5, zeros), 5, audit.InclusionFailed},
		{"relabelled as filtered", withHeader(header(func(h map[string]any) {
			unlisted(7)(h)
			h["filter"] = map[string]any{"since": "1970-01-01T00:00:00Z"}
		}), without(7)), 1, audit.InclusionFailed},
		{"relabelled with a filter its rows do not match", withHeader(header(func(h map[string]any) {
			h["filter"] = map[string]any{"actor": "nobody", "since": "1970-01-01T00:00:00Z"}
		}), lines), 1, audit.Malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(c.lines, "\n")+"\n"), "all", vkey)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) || chainErr.Problem != c.want || chainErr.Seq != c.wantSeq {
				t.Fatalf("VerifyEvidence = %v, want %s at seq %d", err, c.want, c.wantSeq)
			}
			t.Log(err)
		})
	}
}
