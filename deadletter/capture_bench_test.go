package deadletter

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// benchMessage is the shape the bench's reference worker dead-letters: a
// contract body, error headers, a two-entry attempt history and the x-death
// entry a retry queue leaves.
func benchMessage(n int) Message {
	rid := fmt.Sprintf("r-%07d", n)
	text := "expire reservation " + rid + ": timeout: context deadline exceeded (SQLSTATE 57014) after 5s"
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	return Message{
		Queue: "reservation-expiry.dlq", ContentType: "application/json", DeliveryMode: 2,
		MessageID: "expire:" + rid + ":v3", Timestamp: at,
		Body: fmt.Appendf(nil, `{"reservation_id":"%s","expected_version":3,"hold_until":"2026-11-30T12:20:00Z",`+
			`"idempotency_key":"expire:%s:v3","attempt":2,"tenant":"acme-eu-1","hold_id":"h-%08x","not_before":null}`,
			rid, rid, n*2654435761%(1<<32)),
		Headers: amqp.Table{
			"x-error-class":          "db_timeout",
			"x-last-error":           text,
			"x-original-exchange":    "reservations",
			"x-original-routing-key": "reservation.expire",
			"x-attempt-history": []any{
				amqp.Table{"at": at.Add(-40 * time.Second), "error_class": "db_timeout", "error": text},
				amqp.Table{"at": at, "error_class": "db_timeout", "error": text},
			},
			"x-death": []any{amqp.Table{
				"count": int64(1), "reason": "expired", "queue": "reservation-expiry.retry.30s",
				"exchange": "", "routing-keys": []any{"reservation-expiry.retry.30s"},
				"time": at.Add(-5 * time.Second), "original-expiration": "30000",
			}},
		},
	}
}

// BenchmarkCaptureLetter is the capturing process's own work per letter,
// the broker's and the database's aside: Parse, then the letter's columns
// as ingest_letters takes them.
func BenchmarkCaptureLetter(b *testing.B) {
	msgs := make([]Message, 500)
	for i := range msgs {
		msgs[i] = benchMessage(i)
	}
	c := DefaultClassifier()
	now := time.Now()
	cols := newIngestColumns(len(msgs))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := Parse(msgs[i%len(msgs)], c, now)
		if err := cols.set(i%len(msgs), &l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeHeaders(b *testing.B) {
	h := benchMessage(1).Headers
	b.ReportAllocs()
	for b.Loop() {
		_ = EncodeHeaders(h)
	}
}

// BenchmarkDecodeHeaders is what a replay pays per item to turn the
// stored headers back into a table.
func BenchmarkDecodeHeaders(b *testing.B) {
	raw := EncodeHeaders(benchMessage(1).Headers)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeaders(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProperties is what a replay pays per item to read the
// stored properties back.
func BenchmarkDecodeProperties(b *testing.B) {
	m := benchMessage(1)
	raw := EncodeProperties(*m.properties())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeProperties(raw); err != nil {
			b.Fatal(err)
		}
	}
}
