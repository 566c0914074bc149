package termsafe

import (
	"strings"
	"unicode/utf8"
)

// HexDump renders b in the layout of `hexdump -C`: per 16 bytes the offset in
// hex, the bytes in hex in two groups of eight, and the bytes as ASCII between
// bars, with anything outside printable ASCII shown as '.'. The last line holds
// the offset just past the dumped bytes, and empty input gives "". Unlike
// hexdump, repeated lines are not collapsed into '*', so every byte stays on
// screen. At most maxBytes bytes are dumped (maxBytes <= 0 means all), as
// `hexdump -C -n maxBytes` would; truncated reports whether bytes were left out.
// The output contains only printable ASCII and newlines.
func HexDump(b []byte, maxBytes int) (dump string, truncated bool) {
	if maxBytes > 0 && len(b) > maxBytes {
		b, truncated = b[:maxBytes], true
	}
	if len(b) == 0 {
		return "", truncated
	}
	const lineLen = 79 // offset, 2 spaces, 16 "xx ", 1 space, " |", 16 chars, "|\n"
	var sb strings.Builder
	sb.Grow((len(b)/16+2)*lineLen + 9)
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		writeOffset(&sb, off)
		sb.WriteString("  ")
		for i := 0; i < 16; i++ {
			if i == 8 {
				sb.WriteByte(' ')
			}
			if i < len(line) {
				sb.WriteByte(hexDigits[line[i]>>4])
				sb.WriteByte(hexDigits[line[i]&0xf])
				sb.WriteByte(' ')
			} else {
				sb.WriteString("   ")
			}
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	writeOffset(&sb, len(b))
	sb.WriteByte('\n')
	return sb.String(), truncated
}

func writeOffset(sb *strings.Builder, off int) {
	var buf [8]byte
	for i := len(buf) - 1; i >= 0; i-- {
		buf[i] = hexDigits[off&0xf]
		off >>= 4
	}
	sb.Write(buf[:])
}

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
