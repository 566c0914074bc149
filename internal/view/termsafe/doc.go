// Package termsafe renders untrusted text — dead-letter payloads, error texts,
// header values — so that it can be shown on an operator's terminal without
// being able to drive it.
//
// A dead letter may hold anything a producer, a broken worker or an attacker put
// into it. Printed raw, an ESC or 8-bit CSI sequence can clear the screen, move
// the cursor to overwrite earlier lines, set the window title, or (on some
// terminals) write to the clipboard or answer back into the shell; a Unicode bidi
// override can make "approve 12" read as "approve 21". During an incident that
// turns a display into a way to mislead whoever approves a replay.
//
// Escape makes every such character visible as an escape sequence instead:
//
//	\xHH        C0 controls (except newline and tab), DEL, and every byte that
//	            is not part of valid UTF-8, e.g. \x1b, \x00, \x7f, \xff
//	\r          carriage return (it would otherwise overwrite the line)
//	\u00HH      C1 controls U+0080–U+009F, e.g. \u009b (8-bit CSI)
//	\uHHHH      invisible or direction-changing characters: Unicode format
//	\UHHHHHHHH  characters (bidi embeddings, overrides and isolates, LRM/RLM,
//	            zero-width space and joiners, BOM, soft hyphen, tag characters),
//	            line and paragraph separators, and the Hangul filler letters
//	\\          a backslash
//
// Backslash is doubled so the output is unambiguous: a payload that contains the
// four characters `\x1b` is shown as `\\x1b`, never as if it held an ESC byte,
// and the original bytes can always be recovered from what was shown. The cost
// is that Windows paths appear with doubled backslashes. A JSON payload goes
// through JSON instead, which keeps its backslashes (each already begins a
// JSON escape) and writes a dangerous character as the JSON escape of
// itself, so that what is shown is still the JSON that was sent. Quote puts
// EscapeLine's output between double quotes, escaping those inside, as Go
// would quote it.
//
// Everything else — printable ASCII and any other valid Unicode, including
// combining marks and emoji — passes through unchanged, so ordinary text stays
// readable. Escape keeps newlines and tabs; EscapeLine escapes them too, for
// single-line cells. IsText tells when a payload is better shown as a hex dump (encoding/hex.Dump, whose output is printable ASCII), and Truncate
// shortens escaped text without splitting an escape sequence.
package termsafe
