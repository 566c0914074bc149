package audit

import (
	"testing"
	"time"
)

// FuzzParseExportedRow: whatever the fast row reader accepts, the strict
// JSON decoder reads the same way.
func FuzzParseExportedRow(f *testing.F) {
	f.Add([]byte(`{"seq":12,"at":"2026-11-30T03:00:00.012000Z","actor":"alice","db_role":"root","action":"dlq.show","target":"dead_letter:1","details":"{\"a\": \"é\\n\\u0001\"}","outcome":"ok","prev_hash":"00","hash":"11"}`))
	f.Add([]byte(`{"seq":1,"at":"x","actor":"","db_role":"","action":"","target":"","details":"","outcome":"","prev_hash":"","hash":"","proof":"AAAA"}`))
	f.Add([]byte(`{"seq":01,"at":"x","actor":"\u00e9","db_role":"\"","action":"\\","target":"\t","details":"","outcome":"","prev_hash":"","hash":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast fileRow
		var proof []byte
		if !parseExportedRow(b, &fast, &proof) {
			return
		}
		var strict evidenceRow
		full := b
		if proof == nil {
			if err := decodeStrict(full, &strict.fileRow); err != nil {
				t.Fatalf("the fast reader accepted %q, the strict decoder refuses it: %v", b, err)
			}
		} else {
			row, err := decodeEvidenceRowStrictly(b)
			if err != nil {
				t.Fatalf("the fast reader accepted %q, the strict decoder refuses it: %v", b, err)
			}
			strict = row
			if strict.Proof == nil || *strict.Proof != string(proof) {
				t.Fatalf("proof %q, strictly %v", proof, strict.Proof)
			}
		}
		if fast != strict.fileRow {
			t.Fatalf("%q:\nfast   %+v\nstrict %+v", b, fast, strict.fileRow)
		}
	})
}

// FuzzParseExportTime: the positional reader agrees with time.Parse and
// Format's round trip wherever it answers.
func FuzzParseExportTime(f *testing.F) {
	for _, s := range []string{"2026-11-30T03:00:00.120000Z", "2026-02-30T03:00:00.000000Z", "0000-01-01T00:00:00.000000Z",
		"2026-13-01T00:00:00.000000Z", "2026-11-30T24:00:00.000000Z", "2026-11-30T03:00:60.000000Z", "2024-02-29T23:59:59.999999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := parseExportTimeDigits(s)
		if !ok {
			return
		}
		parsed, err := time.Parse(timeLayout, s)
		if err != nil || parsed.Format(timeLayout) != s || parsed.UnixMicro() != fast {
			t.Fatalf("%q: fast %d, time.Parse %v %v", s, fast, parsed, err)
		}
	})
}
