package termsafe

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
		line string // EscapeLine's result; "" means same as want
	}{
		{name: "empty", in: "", want: ""},
		{name: "plain ascii", in: `{"reservation_id":"r-8421"}`, want: `{"reservation_id":"r-8421"}`},
		{name: "unicode text kept", in: "Zürich → 東京 ✓ 😀", want: "Zürich → 東京 ✓ 😀"},
		{name: "combining mark kept", in: "e\u0301", want: "e\u0301"},
		{name: "CSI clear screen", in: "\x1b[2J", want: `\x1b[2J`},
		{name: "OSC set title", in: "\x1b]0;pwned\x07", want: `\x1b]0;pwned\x07`},
		{name: "OSC 52 clipboard", in: "\x1b]52;c;cm0gLXJmIH4=\x1b\\", want: `\x1b]52;c;cm0gLXJmIH4=\x1b\\`},
		{name: "cursor move", in: "ok\x1b[10;10Hfake", want: `ok\x1b[10;10Hfake`},
		{name: "8-bit CSI", in: "\u009b2J", want: `\u009b2J`},
		{name: "C1 range ends", in: "\u0080\u009f\u00a0", want: "\\u0080\\u009f\u00a0"},
		{name: "bidi override", in: "approve \u202e21\u202c", want: `approve \u202e21\u202c`},
		{name: "bidi isolates", in: "\u2066a\u2067b\u2068c\u2069", want: `\u2066a\u2067b\u2068c\u2069`},
		{name: "bidi embeddings and marks", in: "\u202a\u202b\u202d\u200e\u200f\u061c", want: `\u202a\u202b\u202d\u200e\u200f\u061c`},
		{name: "zero width", in: "r-84\u200b21\u200c\u200d\u2060\ufeff", want: `r-84\u200b21\u200c\u200d\u2060\ufeff`},
		{name: "soft hyphen", in: "re\u00adtry", want: `re\u00adtry`},
		{name: "tag characters", in: "ok\U000e0041\U000e007f", want: `ok\U000e0041\U000e007f`},
		{name: "line separators", in: "a\u2028b\u2029c", want: `a\u2028b\u2029c`},
		{name: "hangul filler", in: "admin\u3164", want: `admin\u3164`},
		{name: "NUL", in: "a\x00b", want: `a\x00b`},
		{name: "BEL BS DEL", in: "\a\b\x7f", want: `\x07\x08\x7f`},
		{name: "carriage return", in: "done\rFAILED", want: `done\rFAILED`},
		{name: "all of C0", in: "\x01\x1f", want: `\x01\x1f`},
		{name: "newline and tab", in: "line 1\n\tline 2", want: "line 1\n\tline 2", line: `line 1\n\tline 2`},
		{name: "invalid utf-8", in: "a\xffb\xc3", want: `a\xffb\xc3`},
		{name: "overlong encoding", in: "\xc0\xaf", want: `\xc0\xaf`},
		{name: "utf-16 surrogate", in: "\xed\xa0\x80", want: `\xed\xa0\x80`},
		{name: "backslash doubled", in: `C:\temp\x1b`, want: `C:\\temp\\x1b`},
		{name: "escaped text is not an escape", in: `\u202e`, want: `\\u202e`},
		{name: "replacement char kept", in: "\ufffd", want: "\ufffd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Escape(tt.in); got != tt.want {
				t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := Bytes([]byte(tt.in)); got != tt.want {
				t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
			wantLine := tt.line
			if wantLine == "" {
				wantLine = tt.want
			}
			if got := EscapeLine(tt.in); got != wantLine {
				t.Errorf("EscapeLine(%q) = %q, want %q", tt.in, got, wantLine)
			}
		})
	}
}

// checkSafe fails t if out could drive a terminal: any byte below 0x20 other
// than newline and tab (none at all when oneLine), DEL, a C1 rune, a rune
// isDangerousRune rejects, or invalid UTF-8.
func checkSafe(t *testing.T, in, out string, oneLine bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("escape of %q = %q: not valid UTF-8", in, out)
	}
	for i, r := range out {
		switch {
		case (r == '\n' || r == '\t') && !oneLine:
		case r < 0x20 || r == 0x7f:
			t.Fatalf("escape of %q = %q: control byte %#x at %d", in, out, r, i)
		case r >= 0x80 && r <= 0x9f:
			t.Fatalf("escape of %q = %q: C1 rune %U at %d", in, out, r, i)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			t.Fatalf("escape of %q = %q: bidi control %U at %d", in, out, r, i)
		case isDangerousRune(r):
			t.Fatalf("escape of %q = %q: rune %U at %d", in, out, r, i)
		}
	}
}

// interesting biases random input toward what matters: controls, backslash,
// the first bytes of multi-byte sequences and stray continuation bytes.
var interesting = []string{
	"\x1b", "[", "\x9b", "\xc2\x9b", "\u202e", "\u2066", "\u200b", "\\", "x", "u",
	"\n", "\t", "\r", "\x00", "\x7f", "\xff", "\xc3", "\xe2\x80", "\x80", "a", "é", "😀",
	"\U000e0041", "0", "f",
}

func randomInput(rng *rand.Rand) string {
	var b strings.Builder
	n := rng.IntN(24)
	for range n {
		if rng.IntN(3) == 0 {
			b.WriteByte(byte(rng.IntN(256)))
		} else {
			b.WriteString(interesting[rng.IntN(len(interesting))])
		}
	}
	return b.String()
}

// TestEscapeProperties checks on many random inputs that Escape's output can
// never drive a terminal and that Truncate never splits an escape sequence.
func TestEscapeProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		in := randomInput(rng)
		checkProperties(t, in)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "\x1b[2J", "\x1b]0;pwned\x07", "\u009b", "\u202e", "a\xffb", `\x1b`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkProperties(t, in)
	})
}

func checkProperties(t *testing.T, in string) {
	t.Helper()
	out := Escape(in)
	checkSafe(t, in, out, false)
	line := EscapeLine(in)
	checkSafe(t, in, line, true)
	if strings.ContainsAny(line, "\n\t") {
		t.Fatalf("EscapeLine(%q) = %q: not one line", in, line)
	}
	if Escape(out) == out && strings.ContainsRune(in, '\\') {
		t.Fatalf("Escape(%q) = %q: backslashes not doubled", in, out)
	}
	if got := unescape(t, out); got != in {
		t.Fatalf("Escape(%q) = %q: decodes back to %q", in, out, got)
	}
	for n := 0; n <= utf8.RuneCountInString(line)+1; n++ {
		cut, truncated := Truncate(line, n)
		if !strings.HasPrefix(line, cut) {
			t.Fatalf("Truncate(%q, %d) = %q: not a prefix", line, n, cut)
		}
		if c := utf8.RuneCountInString(cut); c > n {
			t.Fatalf("Truncate(%q, %d) = %q: %d runes", line, n, cut, c)
		}
		if truncated != (cut != line) {
			t.Fatalf("Truncate(%q, %d) = %q, %v: wrong flag", line, n, cut, truncated)
		}
		// The cut is at a token boundary: the rest decodes on its own.
		unescape(t, line[len(cut):])
	}
}

// unescape inverts Escape and EscapeLine, failing t on a malformed sequence.
// It proves the output is unambiguous.
func unescape(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		size, _ := token(s[i:])
		if size < 2 {
			t.Fatalf("unescape(%q): bad escape at %d", s, i)
		}
		seq := s[i : i+size]
		switch seq[1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'x':
			b.WriteByte(byte(parseHex(seq[2:])))
		default:
			b.WriteRune(rune(parseHex(seq[2:])))
		}
		i += size
	}
	return b.String()
}

func parseHex(s string) int {
	v := 0
	for i := 0; i < len(s); i++ {
		v = v<<4 | strings.IndexByte(hexDigits, s[i])
	}
	return v
}

func TestEscapeReturnsInputWhenClean(t *testing.T) { // not parallel: AllocsPerRun
	in := strings.Repeat("expire:r-8421:v3 ", 10)
	if got := Escape(in); got != in {
		t.Fatalf("Escape changed clean text: %q", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = Escape(in) }); allocs != 0 {
		t.Errorf("Escape of clean text allocated %v times, want 0", allocs)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		in            string
		max           int
		want          string
		wantTruncated bool
	}{
		{name: "fits", in: "abc", max: 3, want: "abc"},
		{name: "cut plain", in: "abcdef", max: 4, want: "abcd", wantTruncated: true},
		{name: "zero", in: "abc", max: 0, want: "", wantTruncated: true},
		{name: "zero of empty", in: "", max: 0, want: ""},
		{name: "negative", in: "abc", max: -1, want: "", wantTruncated: true},
		{name: "runes not bytes", in: "東京東京", max: 2, want: "東京", wantTruncated: true},
		{name: "keeps whole \\x", in: `ab\x1b[2J`, max: 6, want: `ab\x1b`, wantTruncated: true},
		{name: "drops split \\x", in: `ab\x1b[2J`, max: 5, want: "ab", wantTruncated: true},
		{name: "drops split \\u", in: `ok \u202e`, max: 8, want: "ok ", wantTruncated: true},
		{name: "drops split \\U", in: `\U000e0041`, max: 9, want: "", wantTruncated: true},
		{name: "drops split \\\\", in: `a\\b`, max: 2, want: "a", wantTruncated: true},
		{name: "drops split \\n", in: `a\nb`, max: 2, want: "a", wantTruncated: true},
		{name: "exact escape", in: `a\u009b`, max: 7, want: `a\u009b`},
		{name: "lone backslash counts as one rune", in: `a\qb`, max: 2, want: `a\`, wantTruncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, truncated := Truncate(tt.in, tt.max)
			if got != tt.want || truncated != tt.wantTruncated {
				t.Errorf("Truncate(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, truncated, tt.want, tt.wantTruncated)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`plain`:         `"plain"`,
		`say "hi"`:      `"say \"hi\""`,
		"esc\x1b[2J":    `"esc\x1b[2J"`,
		`back\slash"`:   `"back\\slash\""`,
		"two\nlines\t!": `"two\nlines\t!"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestJSON: JSON keeps a JSON text's backslashes and writes what could drive
// a terminal as a JSON escape of itself, so the text shown still decodes to
// the value sent.
func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"backslashes kept", `{"p":"C:\\temp","q":"a \"b\""}`, `{"p":"C:\\temp","q":"a \"b\""}`},
		{"escapes kept as escapes", `["\u001b[2J"]`, `["\u001b[2J"]`},
		{"bidi override", "[\"\u202e21\"]", `["\u202e21"]`},
		{"C1 control", "[\"\u009b2J\"]", `["\u009b2J"]`},
		{"tag character as a surrogate pair", "[\"\U000e0041\"]", `["\udb40\udc41"]`},
		{"indentation kept", "{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}"},
		{"unicode text kept", `["Zürich → 東京"]`, `["Zürich → 東京"]`},
		{"a cut rune", "[\"\xe6\x9d", `["\xe6\x9d`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := JSON(tt.in)
			if got != tt.want {
				t.Fatalf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			checkSafe(t, tt.in, got, false)
			if json.Valid([]byte(tt.in)) {
				var sent, shown any
				_ = json.Unmarshal([]byte(tt.in), &sent)
				if err := json.Unmarshal([]byte(got), &shown); err != nil || !reflect.DeepEqual(sent, shown) {
					t.Errorf("JSON(%q) = %q decodes to %v (%v), want %v", tt.in, got, shown, err, sent)
				}
			}
		})
	}
}
