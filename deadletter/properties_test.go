package deadletter_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func int64Ptr(v int64) *int64 { return &v }

// everyProperty is a message property set as a Node.js producer sends it:
// every property, a millisecond timestamp, and strings that are not text.
func everyProperty() deadletter.Properties {
	return deadletter.Properties{ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 5,
		CorrelationID: "corr-16\x00\xff", ReplyTo: "booking.replies", Expiration: "60000", MessageID: "expire:r-1:v1",
		Timestamp: int64Ptr(1796041200000), Type: "reservation.expire.v1", UserID: "guest", AppID: "booking-api@4.2.0"}
}

func TestPropertiesRoundTripThroughJSONB(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	for _, p := range []deadletter.Properties{everyProperty(), {}, {Timestamp: int64Ptr(0)}, {Timestamp: int64Ptr(-1)}} {
		var stored string
		if err := db.Pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(deadletter.EncodeProperties(p))).Scan(&stored); err != nil {
			t.Fatalf("jsonb refused %s: %v", deadletter.EncodeProperties(p), err)
		}
		got, err := deadletter.DecodeProperties([]byte(stored))
		if err != nil {
			t.Fatalf("DecodeProperties(%s): %v", stored, err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("round trip through jsonb:\n got %+v\nwant %+v\n(stored %s)", got, p, stored)
		}
	}
	for _, bad := range []string{`[]`, `{"priority":256}`, `{"delivery_mode":"2"}`, `{"type":5}`, `{"cluster_id":"x"}`, `{} {}`} {
		if _, err := deadletter.DecodeProperties([]byte(bad)); err == nil {
			t.Errorf("DecodeProperties(%s): want an error", bad)
		}
	}
}

func TestParseRecordsEveryProperty(t *testing.T) {
	t.Parallel()
	p := everyProperty()
	m := deadletter.Message{Queue: "q.dlq", Body: gzipped(t, `{"reservationId":"r-1","expectedVersion":1,"idempotencyKey":"expire:r-1:v1"}`),
		ContentType: p.ContentType, ContentEncoding: p.ContentEncoding, DeliveryMode: p.DeliveryMode, Priority: p.Priority,
		CorrelationID: p.CorrelationID, ReplyTo: p.ReplyTo, Expiration: p.Expiration, MessageID: p.MessageID,
		Timestamp: time.Unix(*p.Timestamp, 0), Type: p.Type, UserID: p.UserID, AppID: p.AppID,
		Headers: map[string]any{"x-error-class": "ETIMEDOUT"}}
	l := deadletter.Parse(m, nil, time.Now())
	if l.Properties == nil || !reflect.DeepEqual(*l.Properties, p) {
		t.Errorf("Properties = %+v, want %+v", l.Properties, p)
	}
	// The gzip body is read for its fields and stored as it came.
	if l.ReservationID != "r-1" || l.IdempotencyKey != "expire:r-1:v1" || l.Category != deadletter.TransientExhausted ||
		!bytes.Equal(l.Payload, m.Body) {
		t.Errorf("gzip body: reservation %q, key %q, category %s, payload kept %v", l.ReservationID, l.IdempotencyKey,
			l.Category, bytes.Equal(l.Payload, m.Body))
	}
	// The millisecond timestamp is read as milliseconds.
	if want := time.UnixMilli(*p.Timestamp).UTC(); !l.DeadLetteredAt.Equal(want) {
		t.Errorf("DeadLetteredAt = %s, want %s", l.DeadLetteredAt, want)
	}
	m.ContentEncoding = ""
	if l := deadletter.Parse(m, nil, time.Now()); l.Category != deadletter.Malformed {
		t.Errorf("gzip bytes without the encoding: category %s, want malformed", l.Category)
	}
	m.ContentEncoding, m.Body = "gzip", []byte(`{"not":"gzip"}`)
	if l := deadletter.Parse(m, nil, time.Now()); l.Category != deadletter.TransientExhausted {
		t.Errorf("a body that does not inflate is read as it is: category %s", l.Category)
	}
}

// TestFingerprintKeepsHeaderWidth: copies that differ only in a header's
// wire type differ on the wire, and the contract keeps copies that differ
// as separate rows, so their fingerprints differ; a redelivery, which
// RabbitMQ hands over with every wire type as published (see
// TestIngestKeepsWhatTheBrokerDelivered), keeps its fingerprint. A letter
// with no narrow header keeps the v1 fingerprint it always had
// (TestFingerprintsAreStable), so its redelivery after an upgrade still
// collapses with the copy captured before.
func TestFingerprintKeepsHeaderWidth(t *testing.T) {
	t.Parallel()
	with := func(headers map[string]any) deadletter.Message {
		return deadletter.Message{Queue: "q", Body: []byte(`{}`), MessageID: "m", Headers: headers}
	}
	fp := func(m deadletter.Message) [32]byte { return deadletter.Parse(m, nil, time.Now()).Fingerprint }
	copies := map[string]deadletter.Message{
		"int8 5":         with(map[string]any{"n": int8(5)}),
		"int32 5":        with(map[string]any{"n": int32(5)}),
		"int64 5":        with(map[string]any{"n": int64(5)}),
		"nested int16 5": with(map[string]any{"n": amqp.Table{"v": int16(5)}}),
		"nested int64 5": with(map[string]any{"n": amqp.Table{"v": int64(5)}}),
		"float32 0.5":    with(map[string]any{"n": float32(0.5)}),
		"float64 0.5":    with(map[string]any{"n": float64(0.5)}),
	}
	seen := map[[32]byte]string{}
	for _, name := range slices.Sorted(maps.Keys(copies)) {
		f := fp(copies[name])
		if other, ok := seen[f]; ok {
			t.Errorf("copies %q and %q share a fingerprint: one would be lost", other, name)
		}
		seen[f] = name
		if again := fp(copies[name]); again != f {
			t.Errorf("a redelivery of %q, same wire types, has another fingerprint", name)
		}
	}
	// A volatile header is left out whatever its width.
	a := with(map[string]any{"n": int64(5), "x-delivery-count": int8(1)})
	b := with(map[string]any{"n": int64(5), "x-delivery-count": int64(2)})
	if fp(a) != fp(b) {
		t.Error("x-delivery-count's width changed the fingerprint")
	}
}

// TestIngestKeepsWhatTheBrokerDelivered captures a message with every
// property and header wire type from RabbitMQ and reads it back from the
// archive as the replay runner does.
func TestIngestKeepsWhatTheBrokerDelivered(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	headers := amqp.Table{"b": int8(-8), "B": uint8(200), "s": int16(-300), "u": uint16(65535), "I": int32(-70000),
		"i": uint32(4000000000), "l": int64(1) << 40, "f": float32(0.1), "d": 0.1, "D": amqp.Decimal{Scale: 2, Value: 150},
		"T": time.Unix(1796041200, 0).UTC(), "t": true, "V": nil, "x": []byte{0, 0xff}, "S": "text",
		"F": amqp.Table{"nested": int16(1)}, "A": []any{int8(1), "two", float32(3)}}
	p := everyProperty()
	p.CorrelationID = "corr-16"
	b.publish(t, b.dlq, amqp.Publishing{Headers: headers, ContentType: p.ContentType, ContentEncoding: p.ContentEncoding,
		DeliveryMode: p.DeliveryMode, Priority: p.Priority, CorrelationId: p.CorrelationID, ReplyTo: p.ReplyTo,
		Expiration: "3600000", MessageId: p.MessageID, Timestamp: time.Unix(*p.Timestamp, 0), Type: p.Type, UserId: p.UserID,
		AppId: p.AppID, Body: gzipped(t, `{"reservation_id":"r-1"}`)})
	p.Expiration = "3600000"
	if _, err := b.ingest(t, context.Background(), deadletter.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := deadletter.NewArchive(b.pool, "alice").Show(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Properties == nil || !reflect.DeepEqual(*d.Properties, p) {
		t.Errorf("stored properties %+v, want %+v", d.Properties, p)
	}
	got, err := deadletter.DecodeHeaders(d.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(amqp.Table(got), headers) {
		t.Errorf("stored headers lost their wire types:\n got %#v\nwant %#v", got, headers)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, d.Headers); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{`"$int8":-8`, `"$uint8":200`, `"$int16":-300`, `"$uint16":65535`, `"$int32":-70000`, `"$uint32":4000000000`, `"$float32":"0.1"`} {
		if !strings.Contains(compact.String(), tag) {
			t.Errorf("-o json does not show the wire type %s: %s", tag, compact.String())
		}
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestALetterWithoutPropertiesStoresNone: a letter that carries no
// properties (one of a capture before they were recorded) is stored with
// the column NULL, not an empty object.
func TestALetterWithoutPropertiesStoresNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	l := deadletter.Parse(deadletter.Message{Queue: "q.dlq", Body: []byte(`{"reservation_id":"r-1"}`),
		Headers: amqp.Table{"x-error-class": "db_timeout"}}, deadletter.DefaultClassifier(), time.Now())
	l.Properties = nil
	if _, err := deadletter.Insert(ctx, db.Pool, []deadletter.Letter{l}); err != nil {
		t.Fatal(err)
	}
	var none bool
	var headers string
	if err := db.Pool.QueryRow(ctx, `SELECT properties IS NULL, headers::text FROM expiryctl.dead_letters`).Scan(&none, &headers); err != nil {
		t.Fatal(err)
	}
	if !none || !strings.Contains(headers, "x-error-class") {
		t.Errorf("properties NULL %v, headers %s; want NULL and the letter's headers", none, headers)
	}
}
