package deadletter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// appendAttemptHistory writes events as the JSON array that ingest_letters
// stores as jsonb: the value encoding/json would write for them (the same
// keys, omissions and times), without its reflection, which cost the
// capturing process more than a letter's headers (BenchmarkCaptureLetter).
// jsonb keeps the decoded value, so only the value has to agree, not the
// bytes: encoding/json's HTML escapes are left out. A time encoding/json
// cannot write (a year outside 0–9999) is its error too.
func appendAttemptHistory(dst []byte, events []AttemptEvent) ([]byte, error) {
	dst = append(dst, '[')
	for i := range events {
		e := &events[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if !e.At.IsZero() {
			if y := e.At.Year(); y < 0 || y > 9999 {
				return nil, fmt.Errorf("json: error calling MarshalJSON for type time.Time: year %d outside of range [0,9999]", y)
			}
			dst = append(dst, `"at":"`...)
			dst = e.At.AppendFormat(dst, time.RFC3339Nano)
			dst = append(dst, `",`...)
		}
		dst = append(dst, `"source":`...)
		dst = appendValidJSONString(dst, e.Source)
		dst = appendOptionalField(dst, `,"error_class":`, e.ErrorClass)
		dst = appendOptionalField(dst, `,"error":`, e.Error)
		if e.Attempt != 0 {
			dst = append(dst, `,"attempt":`...)
			dst = strconv.AppendInt(dst, int64(e.Attempt), 10)
		}
		dst = appendOptionalField(dst, `,"trace":`, e.Trace)
		dst = appendOptionalField(dst, `,"reason":`, e.Reason)
		dst = appendOptionalField(dst, `,"queue":`, e.Queue)
		if e.Count != 0 {
			dst = append(dst, `,"count":`...)
			dst = strconv.AppendInt(dst, e.Count, 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// appendOptionalField writes the field key (with its comma and colon) and
// s, unless s is empty: encoding/json's omitempty.
func appendOptionalField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendValidJSONString(append(dst, key...), s)
}

// appendValidJSONString writes s as a JSON string, each byte of it that is
// not UTF-8 replaced by U+FFFD, as encoding/json does.
func appendValidJSONString(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendJSONString(dst, s)
	}
	var valid strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			valid.WriteRune(utf8.RuneError)
		} else {
			valid.WriteString(s[i : i+size])
		}
		i += size
	}
	return appendJSONString(dst, valid.String())
}
