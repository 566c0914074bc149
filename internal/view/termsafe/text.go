package termsafe

import "unicode/utf8"

// IsText reports whether b reads as text and is better shown escaped than as a
// hex dump: it is valid UTF-8, holds no NUL byte, and at most one rune in ten is
// a control character (C0 other than tab, newline, carriage return and form
// feed; DEL; C1). The allowance lets a message with a few ANSI colour codes
// still count as text; binary formats are mostly ruled out by the UTF-8 and NUL
// checks already. Empty input is text.
func IsText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	runes, controls := 0, 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		runes++
		switch {
		case r == 0:
			return false
		case r == '\t' || r == '\n' || r == '\r' || r == '\f':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			controls++
		}
	}
	return controls*10 <= runes
}
