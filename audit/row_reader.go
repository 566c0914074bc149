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

// parseJSONString reads the JSON string at the start of b: without escapes
// the bytes themselves (when they are valid UTF-8, as encoding/json would
// otherwise replace them), with escapes through encoding/json.
func parseJSONString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	escaped := false
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			raw := b[1:i]
			if !escaped {
				if !utf8.Valid(raw) || bytes.IndexFunc(raw, func(r rune) bool { return r < 0x20 }) >= 0 {
					return "", nil, false
				}
				return string(raw), b[i+1:], true
			}
			var s string
			if err := json.Unmarshal(b[:i+1], &s); err != nil {
				return "", nil, false
			}
			return s, b[i+1:], true
		case c < 0x20:
			return "", nil, false
		}
	}
	return "", nil, false
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
