package termsafe

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Escape returns s with every character that could control a terminal, hide
// text or reorder it replaced by a visible escape sequence (see the package
// documentation for the list). Newlines and tabs are kept, so multi-line text
// such as a stack trace keeps its shape; use EscapeLine for a single line. The
// result is valid UTF-8 and contains no control character other than '\n' and
// '\t'. Text that needs no escaping is returned as is, without copying.
func Escape(s string) string {
	return escape(s, false)
}

// EscapeLine is Escape that also shows newlines and tabs as `\n` and `\t`, so
// the result is one line: for table cells, list rows and log-style output.
func EscapeLine(s string) string {
	return escape(s, true)
}

// Bytes is Escape for a payload held as bytes. Bytes that are not valid UTF-8
// are shown as `\xHH`; use IsText to choose a hex view (encoding/hex.Dump) instead for
// binary payloads.
func Bytes(b []byte) string {
	return escape(string(b), false)
}

func escape(s string, oneLine bool) string {
	i := 0
	for i < len(s) && !needsEscapeASCII(s[i], oneLine) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8 + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if needsEscapeASCII(c, oneLine) {
				writeASCIIEscape(&b, c)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeByteEscape(&b, c)
		case isDangerousRune(r):
			writeRuneEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscapeASCII reports whether the single byte c must be escaped. Every
// byte at or above 0x80 goes through UTF-8 decoding, so it reports true for
// those too.
func needsEscapeASCII(c byte, oneLine bool) bool {
	switch {
	case c == '\n' || c == '\t':
		return oneLine
	case c < 0x20, c == 0x7f, c == '\\', c >= utf8.RuneSelf:
		return true
	}
	return false
}

func writeASCIIEscape(b *strings.Builder, c byte) {
	switch c {
	case '\\':
		b.WriteString(`\\`)
	case '\n':
		b.WriteString(`\n`)
	case '\t':
		b.WriteString(`\t`)
	case '\r':
		b.WriteString(`\r`)
	default:
		writeByteEscape(b, c)
	}
}

func writeByteEscape(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

// writeRuneEscape writes r as \uHHHH, or \UHHHHHHHH beyond the BMP.
func writeRuneEscape(b *strings.Builder, r rune) {
	digits := 4
	if r > 0xffff {
		b.WriteString(`\U`)
		digits = 8
	} else {
		b.WriteString(`\u`)
	}
	for shift := (digits - 1) * 4; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}

// isDangerousRune reports whether a valid non-ASCII rune must be escaped: it
// controls a terminal (C1), changes the direction or joining of the text
// around it, or is invisible so that two different strings look the same.
func isDangerousRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1 controls; U+009B is an 8-bit CSI
		return true
	case unicode.Is(unicode.Cf, r):
		// Format characters: bidi embeddings, overrides and isolates
		// (U+202A–U+202E, U+2066–U+2069), LRM/RLM/ALM, zero-width space,
		// (non-)joiners, word joiner, BOM, soft hyphen, invisible operators
		// and the tag characters (U+E0000 block) used to smuggle hidden text.
		return true
	case r == 0x2028 || r == 0x2029: // line and paragraph separators
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0:
		// Hangul fillers: letters that render as blank space, a known way to
		// make different identifiers look identical.
		return true
	}
	return false
}

// Truncate shortens s, which should be output of Escape, EscapeLine or Bytes,
// to at most maxRunes runes, and reports whether anything was cut. It never
// splits one of the escape sequences this package writes (`\x1b`, `\u202e`,
// `\\`, …): a sequence that does not fit is dropped whole, so the result may be
// a few runes shorter than maxRunes. Runes are counted, not terminal columns,
// so wide (East Asian) characters take more room than counted. Callers that
// show a marker such as "…" should reserve room for it in maxRunes.
func Truncate(s string, maxRunes int) (string, bool) {
	if maxRunes <= 0 {
		return "", s != ""
	}
	n := 0
	for i := 0; i < len(s); {
		size, runes := token(s[i:])
		if n+runes > maxRunes {
			return s[:i], true
		}
		n += runes
		i += size
	}
	return s, false
}

// token returns the length in bytes and in runes of the first display unit of
// s: one escape sequence written by this package, or one rune.
func token(s string) (size, runes int) {
	if s[0] == '\\' && len(s) >= 2 {
		switch s[1] {
		case '\\', 'n', 't', 'r':
			return 2, 2
		case 'x':
			if hexRun(s[2:], 2) {
				return 4, 4
			}
		case 'u':
			if hexRun(s[2:], 4) {
				return 6, 6
			}
		case 'U':
			if hexRun(s[2:], 8) {
				return 10, 10
			}
		}
	}
	_, size = utf8.DecodeRuneInString(s)
	return size, 1
}

// hexRun reports whether s starts with n lowercase hex digits.
func hexRun(s string, n int) bool {
	if len(s) < n {
		return false
	}
	for i := 0; i < n; i++ {
		if strings.IndexByte(hexDigits, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Quote is EscapeLine between double quotes, with a double quote inside
// shown as \": a value cannot end its quotes early, and, since EscapeLine
// already shows a backslash as \\, every escape reads one way.
func Quote(s string) string {
	return `"` + strings.ReplaceAll(EscapeLine(s), `"`, `\"`) + `"`
}

// JSON is Escape for a valid JSON text, such as a payload json.Indent has
// pretty-printed. Backslashes are kept as they are, since in valid JSON each
// one already begins an escape and doubling them would show a different
// document; a character a terminal could act on, which JSON allows raw only
// inside a string, is written as the JSON escape of itself (\u202e, or a
// surrogate pair above U+FFFF), so the text shown still decodes to what was
// sent. A byte that is not valid UTF-8, which a cut payload can end with, is
// shown as \xHH, as Escape shows it.
func JSON(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '\n' || c == '\t' || c >= 0x20 && c != 0x7f {
				b.WriteByte(c)
			} else {
				writeJSONEscape(&b, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeByteEscape(&b, c)
		case isDangerousRune(r):
			writeJSONEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func writeJSONEscape(b *strings.Builder, r rune) {
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		writeJSONEscape(b, hi)
		writeJSONEscape(b, lo)
		return
	}
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}
