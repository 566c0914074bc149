package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers a replayed message carries, naming the request it belongs to.
// `dlq ingest` reads x-replay-request and x-replay-count back when a replayed
// job dies again, which is how the runner sees its replays die again.
const (
	// HeaderReplayRequest is the replay request id (int64).
	HeaderReplayRequest = "x-replay-request"
	// HeaderReplayCount is how often the job has now been replayed: the
	// letter's own x-replay-count plus one (int64).
	HeaderReplayCount = "x-replay-count"
	// HeaderReplayedBy is the actor who ran the replay.
	HeaderReplayedBy = "x-replayed-by"
	// HeaderApprovedBy is the approver of the request.
	HeaderApprovedBy = "x-approved-by"
	// HeaderReplayItem is the dead letter id the message replays (int64).
	HeaderReplayItem = "x-replay-item"
	// HeaderReplayedAt is when the run sent the message (an AMQP
	// timestamp): the timestamp property keeps the original's time.
	HeaderReplayedAt = "x-replayed-at"
)

// strippedHeaders are the broker's and the worker's failure bookkeeping. A
// replayed job starts afresh: left in place, x-attempt-history would tell the
// reference worker its attempt budget was already spent, and x-death would
// make the next dead-lettering look older than it is.
var strippedHeaders = map[string]bool{
	"x-death":           true,
	"x-delivery-count":  true,
	"x-error-class":     true,
	"x-last-error":      true,
	"x-attempt-history": true,
	// The attempt and retry counters workers and retry libraries keep:
	// like the history, they would spend the replayed job's budget.
	"x-attempt":     true,
	"x-retry-count": true,
	"x-retries":     true,
	"retry-count":   true,
}

// strippedPrefixes are a broker's x-first-death-* and x-last-death-*.
var strippedPrefixes = []string{"x-first-death-", "x-last-death-"}

func stripped(key string) bool {
	if strippedHeaders[key] {
		return true
	}
	for _, p := range strippedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// Stripped cuts a letter's failure bookkeeping out of its stored headers
// (deadletter's JSON), leaving every other byte as it was: a replayed job
// starts afresh. It is most of a dead letter's headers (nested tables with
// times), so it is cut before anything decodes them.
func Stripped(stored json.RawMessage) json.RawMessage {
	if stored == nil {
		return nil
	}
	return dropTopLevel(stored, stripped)
}

// marks are the headers naming the replay that item's message carries,
// most needed first (Copy.Marks).
func marks(req Request, actor string, item int64, replayCount int, at time.Time) []Mark {
	return []Mark{
		{HeaderReplayRequest, req.ID},
		{HeaderReplayCount, int64(replayCount) + 1},
		{HeaderReplayItem, item},
		{HeaderReplayedBy, actor},
		{HeaderApprovedBy, req.ReviewedBy},
		{HeaderReplayedAt, at.UTC().Truncate(time.Second)},
	}
}

// idempotencyKeyFields are the body fields that hold the idempotency key, in
// the contract's two spellings.
var idempotencyKeyFields = []string{"idempotency_key", "idempotencyKey"}

// FreshKey returns the key a fresh-key replay of request gives a job whose
// key was old.
func FreshKey(old string, request int64) string {
	return old + ":replay:" + strconv.FormatInt(request, 10)
}

// rewriteIdempotencyKey replaces the value of the top-level idempotency key
// field(s) of a JSON object body with FreshKey(value, request), leaving
// every other byte as it was (key order, spacing, number formatting). It
// returns the new body and the new key; an error when the body is not a
// JSON object or has no idempotency key.
func rewriteIdempotencyKey(body []byte, request int64) ([]byte, string, error) {
	spans, err := keySpans(body)
	if err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	prev := 0
	newKey := ""
	for _, s := range spans {
		out.Write(body[prev:s.start])
		k := FreshKey(s.old, request)
		if newKey == "" {
			newKey = k
		}
		enc, _ := json.Marshal(k)
		out.Write(enc)
		prev = s.end
	}
	out.Write(body[prev:])
	return out.Bytes(), newKey, nil
}

// keySpan is where the value of an idempotency key field lies in a body,
// and the key it holds.
type keySpan struct {
	start, end int
	old        string
}

// keySpans finds the values of the top-level idempotency key fields of a
// JSON object body, in order.
func keySpans(body []byte) ([]keySpan, error) {
	var spans []keySpan
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the body is not valid JSON: %w", err)
		}
		key, _ := keyTok.(string)
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the body is not valid JSON: %w", err)
		}
		end := int(dec.InputOffset())
		if !isKeyField(key) {
			continue
		}
		// The value starts after the colon and any white space.
		start := afterKey
		for start < end && (body[start] == ' ' || body[start] == '\t' || body[start] == '\n' || body[start] == '\r' || body[start] == ':') {
			start++
		}
		var old string
		if err := json.Unmarshal(raw, &old); err != nil {
			// A number or other scalar: its JSON text is the key.
			old = string(bytes.TrimSpace(raw))
		}
		if old == "" || old == "null" {
			return nil, fmt.Errorf("the body's %s is empty", key)
		}
		spans = append(spans, keySpan{start, end, old})
	}
	if len(spans) == 0 {
		return nil, errors.New("the body has no idempotency_key or idempotencyKey field")
	}
	return spans, nil
}

func isKeyField(k string) bool {
	for _, f := range idempotencyKeyFields {
		if k == f {
			return true
		}
	}
	return false
}

// dropTopLevel returns the JSON object raw without the members whose key
// drop says to drop, leaving every other byte of the kept members as it
// was. Stored keys equal the real ones for every name replay drops (the
// header encoding rewrites only keys that begin with "$" or are not plain
// UTF-8), so the raw key text is compared. Input it cannot split (not an
// object, broken JSON) comes back unchanged, for the decoder to report.
func dropTopLevel(raw []byte, drop func(string) bool) []byte {
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return raw
	}
	i = skipSpace(raw, i+1)
	first := true
	for i < len(raw) && raw[i] != '}' {
		keyStart := i
		keyEnd, ok := scanString(raw, i)
		if !ok {
			return raw
		}
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return raw
		}
		valStart := skipSpace(raw, i+1)
		valEnd, ok := scanValue(raw, valStart)
		if !ok {
			return raw
		}
		key := raw[keyStart+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 || !drop(string(key)) {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, raw[keyStart:keyEnd]...)
			out = append(out, ':')
			out = append(out, raw[valStart:valEnd]...)
		}
		i = skipSpace(raw, valEnd)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		} else if i >= len(raw) || raw[i] != '}' {
			return raw
		}
	}
	if i >= len(raw) {
		return raw
	}
	return append(out, '}')
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the JSON string starting at b[i].
func scanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// scanValue returns the index after the JSON value starting at b[i].
func scanValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := scanString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
	}
	return len(b), len(b) > i
}
