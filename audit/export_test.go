package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// hostileEntries are rows whose text exercises every escape an export
// format has: CSV separators and quotes, CR/LF, JSON escapes, control
// characters, U+2028, and non-ASCII.
func hostileEntries() []audit.Entry {
	return []audit.Entry{
		{Actor: "alice", Action: "dlq.show", Target: "dead_letter:1", Details: map[string]any{"payload_size": 3}},
		{Actor: "a,b \"c\"\r\nd", Action: "dlq.list", Target: "t\ttab", Details: map[string]any{"filter": map[string]any{"search": "x,\"y\"\n\\z"}}},
		{Actor: "Zoë 👩🏽‍💻", Action: "dlq.list", Target: "queue:réservation\u2028", Details: map[string]any{"why": "naïve\u0001\u001b[31m"}},
		{Actor: "", Action: "", Target: "", Details: nil, Outcome: audit.Refused},
		{Actor: `\.`, Action: "x\r", Target: "\n", Details: []any{1.5, "two", nil, true, 1e21}},
		{Actor: "bob", Action: "replay.approve", Target: "replay_request:9", Outcome: audit.Refused, Details: map[string]any{"big": strings.Repeat("é\"\\", 40000)}},
	}
}

// TestExportRoundTrip exports hostile rows in every format, checks that
// standard parsers read back exactly the database's values, and that
// VerifyFile accepts each file and names the same head as the export.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	seedChain(t, db.Pool, 20)
	for _, e := range hostileEntries() {
		if err := recordAsTheDatabase(ctx, db.Pool, e); err != nil {
			t.Fatal(err)
		}
	}
	page, err := audit.List(ctx, db.Pool, audit.Filter{}, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := page.Rows
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	for _, format := range audit.Formats() {
		t.Run(string(format), func(t *testing.T) {
			var buf bytes.Buffer
			res, err := audit.Export(ctx, db.Pool, &buf, format, audit.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			last := want[len(want)-1]
			if res.Rows != int64(len(want)) || res.Head != (audit.Anchor{Seq: last.Seq, Hash: last.Hash}) {
				t.Fatalf("export result %+v, want %d rows ending at %d", res, len(want), last.Seq)
			}
			got := parseExport(t, format, buf.Bytes())
			if len(got) != len(want) {
				t.Fatalf("parsed %d rows, want %d", len(got), len(want))
			}
			for i, w := range want {
				g := got[i]
				wantFields := []string{itoa(w.Seq), audit.FormatTime(w.At), w.Actor, w.DBRole, w.Action, w.Target,
					string(w.Details), w.Outcome, w.PrevHash.String(), w.Hash.String()}
				for k, name := range audit.ExportFields {
					if g[name] != wantFields[k] {
						t.Errorf("seq %d %s = %q, want %q", w.Seq, name, clip(g[name]), clip(wantFields[k]))
					}
				}
			}
			vres, err := audit.VerifyFile(ctx, bytes.NewReader(buf.Bytes()), "export", audit.VerifyOptions{Anchor: &res.Head})
			if err != nil {
				t.Fatal(err)
			}
			if vres.Rows != res.Rows || vres.Head != res.Head {
				t.Fatalf("verified %+v, exported %+v", vres, res)
			}
			// CRLF line ends (a file that passed through a Windows editor)
			// do not change a CSV's or ndjson's values.
			if format != audit.JSON {
				crlf := crlfLineEnds(buf.Bytes(), format)
				if _, err := audit.VerifyFile(ctx, bytes.NewReader(crlf), "export-crlf", audit.VerifyOptions{}); err != nil {
					t.Fatalf("CRLF line ends: %v", err)
				}
			}
		})
	}
}

// crlfLineEnds turns the LF that ends each record into CRLF, leaving LFs
// inside quoted CSV fields alone (ndjson has none: JSON escapes them).
func crlfLineEnds(b []byte, format audit.Format) []byte {
	var out bytes.Buffer
	inQuotes := false
	for _, c := range b {
		if format == audit.CSV && c == '"' {
			inQuotes = !inQuotes
		}
		if c == '\n' && !inQuotes {
			out.WriteByte('\r')
		}
		out.WriteByte(c)
	}
	return out.Bytes()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// parseExport reads an export with the standard library's parsers, as a
// reviewer's own tools would, into one map of field → text per row.
func parseExport(t *testing.T, format audit.Format, b []byte) []map[string]string {
	t.Helper()
	var rows []map[string]string
	fromJSON := func(obj map[string]any) map[string]string {
		m := map[string]string{}
		for k, v := range obj {
			switch v := v.(type) {
			case string:
				m[k] = v
			case float64:
				m[k] = itoa(int64(v))
			default:
				t.Fatalf("field %s is %T, want a string or number", k, v)
			}
		}
		return m
	}
	switch format {
	case audit.NDJSON:
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var obj map[string]any
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				t.Fatalf("line %q: %v", clip(sc.Text()), err)
			}
			rows = append(rows, fromJSON(obj))
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	case audit.JSON:
		var arr []map[string]any
		if err := json.Unmarshal(b, &arr); err != nil {
			t.Fatal(err)
		}
		for _, obj := range arr {
			rows = append(rows, fromJSON(obj))
		}
	case audit.CSV:
		records, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(records[0], ",") != strings.Join(audit.ExportFields, ",") {
			t.Fatalf("header %v", records[0])
		}
		for _, rec := range records[1:] {
			m := map[string]string{}
			for i, name := range audit.ExportFields {
				// encoding/csv turns CRLF inside quotes into LF; the
				// verifier's own reader does not.
				m[name] = rec[i]
			}
			rows = append(rows, m)
		}
		for _, m := range rows {
			if m["actor"] == "a,b \"c\"\nd" {
				m["actor"] = "a,b \"c\"\r\nd"
			}
		}
	}
	return rows
}

// TestExportFiltered checks filters, ThroughSeq and what a filtered export
// proves: its rows are each self-consistent, but the jumps between them are
// gaps that fail unless allowed.
func TestExportFiltered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 40) // actors cycle alice, bob, oncall-ünïcode, ci
	var buf bytes.Buffer
	res, err := audit.Export(ctx, db.Pool, &buf, audit.NDJSON, audit.Filter{Actor: "bob", ThroughSeq: 30})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 8 || res.Head.Seq != 29 {
		t.Fatalf("bob's rows through 30: %+v, want 8 ending at 29", res)
	}
	_, err = audit.VerifyFile(ctx, bytes.NewReader(buf.Bytes()), "bob.ndjson", audit.VerifyOptions{})
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.Gap || chainErr.Seq != 2 ||
		!strings.Contains(err.Error(), "rows 2–4 are missing between seq 1 and seq 5 (a filtered export, or deletion)") {
		t.Fatalf("filtered export without --allow-gaps: %v", err)
	}
	vres, err := audit.VerifyFile(ctx, bytes.NewReader(buf.Bytes()), "bob.ndjson", audit.VerifyOptions{AllowGaps: true})
	if err != nil {
		t.Fatal(err)
	}
	if vres.Rows != 8 || vres.Gaps != 7 || vres.Head != res.Head {
		t.Fatalf("with gaps allowed: %+v, want 8 rows, 7 gaps, head %v", vres, res.Head)
	}
	edited := bytes.Replace(buf.Bytes(), []byte(`"actor":"bob"`), []byte(`"actor":"eve"`), 1)
	if _, err := audit.VerifyFile(ctx, bytes.NewReader(edited), "bob.ndjson", audit.VerifyOptions{AllowGaps: true}); !errors.As(err, &chainErr) || chainErr.Problem != audit.HashMismatch {
		t.Fatalf("an edited row of a filtered export: %v", err)
	}

	// Time filters: rows are 1ms apart from seedEpoch.
	buf.Reset()
	res, err = audit.Export(ctx, db.Pool, &buf, audit.CSV, audit.Filter{Since: seedEpoch.Add(10 * time.Millisecond), Until: seedEpoch.Add(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 10 || res.Head.Seq != 19 {
		t.Fatalf("since/until: %+v, want seq 10–19", res)
	}
	if vres, err := audit.VerifyFile(ctx, bytes.NewReader(buf.Bytes()), "window.csv", audit.VerifyOptions{From: 10}); err != nil || vres.Rows != 10 {
		t.Fatalf("a contiguous window verified from its first seq: %+v, %v", vres, err)
	}

	buf.Reset()
	res, err = audit.Export(ctx, db.Pool, &buf, audit.JSON, audit.Filter{Action: "no.such.action"})
	if err != nil || res.Rows != 0 || buf.String() != "[]\n" {
		t.Fatalf("empty export: %+v, %v, %q", res, err, buf.String())
	}
	if vres, err := audit.VerifyFile(ctx, &buf, "empty.json", audit.VerifyOptions{}); err != nil || vres.Rows != 0 {
		t.Fatalf("empty file: %+v, %v", vres, err)
	}
}

// TestVerifyFileRejectsForeignContent checks that files that are not
// unchanged exports are reported as malformed, not as intact.
func TestVerifyFileRejectsForeignContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 3)
	var buf bytes.Buffer
	if _, err := audit.Export(ctx, db.Pool, &buf, audit.NDJSON, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(buf.String(), "\n", 2)[0]
	cases := map[string]string{
		"extra field":   strings.Replace(line, `{"seq"`, `{"approved_by":"ceo","seq"`, 1) + "\n",
		"not json":      "{seq: 1}\n",
		"bad time":      strings.Replace(line, "T03:00:00", "T3:00:00", 1) + "\n",
		"bad csv head":  "seq,at,actor\n1,2,3\n",
		"unclosed json": "[" + line,
		"short hash":    regexp.MustCompile(`"hash":"[0-9a-f]{64}"`).ReplaceAllString(line, `"hash":"abcd"`) + "\n",
	}
	for name, content := range cases {
		_, err := audit.VerifyFile(ctx, strings.NewReader(content), name, audit.VerifyOptions{})
		var chainErr *audit.ChainError
		if !errors.As(err, &chainErr) || chainErr.Problem != audit.Malformed {
			t.Errorf("%s: %v, want a malformed-row ChainError", name, err)
		}
	}
}
