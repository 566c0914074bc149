package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// exportedKeys are the keys of an exported row in the order the encoder
// writes them, each with what precedes its value.
var exportedKeys = [...]string{`{"seq":`, `,"at":`, `,"actor":`, `,"db_role":`, `,"action":`, `,"target":`,
	`,"details":`, `,"outcome":`, `,"prev_hash":`, `,"hash":`}

// parseExportedRow reads a row written exactly as the ndjson encoder
// writes it (keys in its order, no white space), with an optional
// `,"proof":"…"` before the closing brace, without encoding/json's
// reflection: a verifier reads a million of them. It reports false for any
// other spelling, which the caller then decodes strictly; whatever it
// accepts, encoding/json decodes to the same values.
func parseExportedRow(b []byte, row *fileRow, proof *[]byte) bool {
	*row = fileRow{}
	*proof = nil
	strs := [...]*string{nil, &row.At, &row.Actor, &row.DBRole, &row.Action, &row.Target, &row.Details, &row.Outcome,
		&row.PrevHash, &row.Hash}
	for i, key := range exportedKeys {
		if !bytes.HasPrefix(b, []byte(key)) {
			return false
		}
		b = b[len(key):]
		if i == 0 {
			end := 0
			for end < len(b) && b[end] >= '0' && b[end] <= '9' {
				end++
			}
			// encoding/json reads a leading zero or an empty number as an
			// error; leave those to it.
			if end == 0 || end > 1 && b[0] == '0' {
				return false
			}
			seq, err := strconv.ParseInt(string(b[:end]), 10, 64)
			if err != nil {
				return false
			}
			row.Seq, b = seq, b[end:]
			continue
		}
		s, rest, ok := parseJSONString(b)
		if !ok {
			return false
		}
		*strs[i], b = s, rest
	}
	if p, ok := bytes.CutPrefix(b, []byte(`,"proof":"`)); ok {
		end := bytes.IndexByte(p, '"')
		if end < 0 || !isBase64Text(p[:end]) {
			return false
		}
		*proof, b = p[:end], p[end+1:]
	}
	return len(b) == 1 && b[0] == '}'
}

// parseJSONString reads the JSON string at the start of b. Plain bytes
// (valid UTF-8, as encoding/json would otherwise replace them) and the
// one-letter escapes are read here; a string with a \u escape goes
// through encoding/json.
func parseJSONString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	escapes := 0
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			if i+1 >= len(b) {
				return "", nil, false
			}
			if b[i+1] == 'u' {
				var s string
				end := bytes.IndexByte(b[i:], '"')
				for end >= 0 && isEscapedQuote(b, i+end) {
					next := bytes.IndexByte(b[i+end+1:], '"')
					if next < 0 {
						return "", nil, false
					}
					end += next + 1
				}
				if end < 0 {
					return "", nil, false
				}
				if err := json.Unmarshal(b[:i+end+1], &s); err != nil {
					return "", nil, false
				}
				return s, b[i+end+1:], true
			}
			escapes++
			i++
		case c == '"':
			raw := b[1:i]
			if !utf8.Valid(raw) {
				return "", nil, false
			}
			if escapes == 0 {
				return string(raw), b[i+1:], true
			}
			out := make([]byte, 0, len(raw)-escapes)
			for j := 0; j < len(raw); j++ {
				if raw[j] != '\\' {
					out = append(out, raw[j])
					continue
				}
				j++
				switch raw[j] {
				case '"', '\\', '/':
					out = append(out, raw[j])
				case 'b':
					out = append(out, '\b')
				case 'f':
					out = append(out, '\f')
				case 'n':
					out = append(out, '\n')
				case 'r':
					out = append(out, '\r')
				case 't':
					out = append(out, '\t')
				default:
					return "", nil, false
				}
			}
			return string(out), b[i+1:], true
		case c < 0x20:
			return "", nil, false
		}
	}
	return "", nil, false
}

// isEscapedQuote reports whether the quote at b[i] is preceded by an odd
// number of backslashes.
func isEscapedQuote(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// isBase64Text reports whether b holds only the standard base64 alphabet,
// which JSON carries unescaped.
func isBase64Text(b []byte) bool {
	for _, c := range b {
		if !base64Text[c] {
			return false
		}
	}
	return true
}

var base64Text = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()
