package deadletter

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// fuzzMessage builds a DLQ message from fuzzed parts. shape picks among the
// header layouts a producer or the broker might send, wrong types included.
func fuzzMessage(body []byte, class, lastError, key, reason string, count, shape int64, messageID string) Message {
	h := amqp.Table{
		"x-error-class":    class,
		"x-last-error":     []byte(lastError),
		"x-delivery-count": shape,
		"x-attempt-history": []any{
			amqp.Table{"at": shape, "error_class": class, "error": lastError},
			amqp.Table{"at": lastError, "errorClass": []byte(class)},
			reason,
		},
		"x-death": []any{amqp.Table{
			"count": count, "reason": reason, "queue": key, "exchange": []byte(key),
			"routing-keys": []any{key, []byte(reason), count}, "time": time.Unix(count, 0),
		}},
		"x-original-exchange": reason,
		"x-replay-request":    lastError,
		"x-replay-count":      count,
		key:                   []any{class, []byte(lastError), count, float64(count) / 3, amqp.Table{reason: key}},
	}
	switch shape & 3 {
	case 1:
		h["x-death"] = reason
		h["x-error-class"] = count
	case 2:
		h["x-attempt-history"] = amqp.Table{"at": class}
		h["x-death"] = []any{amqp.Table{"count": float64(count), "reason": []byte(reason), "time": reason}, nil}
	case 3:
		delete(h, "x-error-class")
		delete(h, "x-last-error")
		h["x-delivery-count"] = int32(shape)
	}
	// The shapes Node.js producers and workers send: the history as JSON
	// text, retry counters, times in milliseconds.
	if shape&4 != 0 {
		h["x-attempt-history"] = lastError
		h["x-retry-count"] = class
		h["x-attempt"] = count
		h["x-retries"] = float64(count) / 7
	}
	ts := time.Unix(count, shape)
	if shape&8 != 0 {
		ts = time.UnixMilli(count).Add(time.Duration(shape))
	}
	return Message{
		Queue:       key,
		Body:        body,
		Headers:     h,
		ContentType: class,
		MessageID:   messageID,
		Timestamp:   ts,
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(testJob), "db_timeout", "context deadline exceeded", "x-custom", "rejected", int64(3), int64(0), "r-8421:v3")
	f.Add([]byte(`{"reservationId":"r-1","expectedVersion":"3","holdUntil":"2026-11-30T12:20:00+01:00","idempotencyKey":"k","attempt":1}`),
		"", "", "x-death", "expired", int64(1), int64(3), "")
	f.Add([]byte(`{"reservation_id":"r-\u0000","idempotency_key":"k\\x00"}`), "a\x00b", "caf\xe9", "$bytes", "maxlen", int64(-1), int64(1), "m\x00")
	f.Add([]byte{}, "", "", "", "", int64(0), int64(0), "")
	f.Add([]byte(`{"reservationId":"r-1","holdUntil":1796041200000,"notBefore":1796041200}`), "3",
		`[{"timestamp":"2026-11-30T12:18:00.000Z","errorClass":"ECONNREFUSED","message":"connect ECONNREFUSED"},{"time":1796041200000},{"at":1.7e9}]`,
		"x-retries", "rejected", int64(1796041200000), int64(12), "")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00, 0xff}, "validation", "\xff\xfe", "$key:AA==", "delivery_limit", int64(1<<62), int64(2), "\xff")
	f.Fuzz(func(t *testing.T, body []byte, class, lastError, key, reason string, count, shape int64, messageID string) {
		m := fuzzMessage(body, class, lastError, key, reason, count, shape, messageID)
		orig := bytes.Clone(body)

		// parse, not Parse: Parse's recover would hide the panics this is
		// looking for.
		l := parse(m, nil, testIngested)

		if !bytes.Equal(l.Payload, orig) || !bytes.Equal(body, orig) {
			t.Fatal("Payload is not the body, or the body was modified")
		}
		if !slices.Contains(Categories(), l.Category) {
			t.Fatalf("Category %q is not one of Categories()", l.Category)
		}
		if string(l.Headers) != string(EncodeHeaders(m.Headers)) {
			t.Fatal("Headers is not EncodeHeaders(message headers)")
		}
		assertJSONBSafe(t, l.Headers)
		decoded, err := DecodeHeaders(l.Headers)
		if err != nil {
			t.Fatalf("DecodeHeaders: %v\n%s", err, l.Headers)
		}
		if again := EncodeHeaders(decoded); string(again) != string(l.Headers) {
			t.Fatalf("encoding is not stable through a round trip:\n%s\n%s", l.Headers, again)
		}
		for name, s := range letterTexts(l) {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("%s = %q is not PostgreSQL text", name, s)
			}
		}
		for name, v := range map[string]any{"AttemptHistory": l.AttemptHistory, "Deaths": l.Deaths} {
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s cannot be stored: %v", name, err)
			}
			assertJSONBSafe(t, raw)
		}
		if l.DeadLetteredAt.IsZero() || l.DeadLetteredAt.Location() != time.UTC || l.Attempts < 0 || l.ReplayCount < 0 {
			t.Fatalf("DeadLetteredAt %v, Attempts %d, ReplayCount %d", l.DeadLetteredAt, l.Attempts, l.ReplayCount)
		}
		if Parse(m, nil, testIngested).Fingerprint != l.Fingerprint {
			t.Fatal("fingerprint is not deterministic")
		}
	})
}

// letterTexts lists every text a Letter sends to a PostgreSQL text column
// or into its jsonb timeline.
func letterTexts(l Letter) map[string]string {
	texts := map[string]string{
		"JobKey": l.JobKey, "MessageID": l.MessageID, "ReservationID": l.ReservationID,
		"IdempotencyKey": l.IdempotencyKey, "SourceQueue": l.SourceQueue, "OriginQueue": l.OriginQueue,
		"OriginalExchange": l.OriginalExchange, "OriginalRoutingKey": l.OriginalRoutingKey,
		"ErrorClass": l.ErrorClass, "LastError": l.LastError, "ContentType": l.ContentType,
	}
	for i, e := range l.AttemptHistory {
		p := "AttemptHistory[" + strconv.Itoa(i) + "]."
		texts[p+"Source"], texts[p+"ErrorClass"], texts[p+"Error"] = e.Source, e.ErrorClass, e.Error
		texts[p+"Reason"], texts[p+"Queue"] = e.Reason, e.Queue
	}
	for i, d := range l.Deaths {
		p := "Deaths[" + strconv.Itoa(i) + "]."
		texts[p+"Reason"], texts[p+"Queue"], texts[p+"Exchange"] = d.Reason, d.Queue, d.Exchange
		texts[p+"RoutingKeys"] = strings.Join(d.RoutingKeys, ",")
	}
	return texts
}
