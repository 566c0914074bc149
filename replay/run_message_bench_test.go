package replay

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// BenchmarkReplayHeaders is what the runner pays per item to rebuild a
// dead letter's headers: the bookkeeping cut out of the stored JSON, the
// rest decoded with its wire types, the replay's own headers added.
func BenchmarkReplayHeaders(b *testing.B) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	text := "expire reservation r-0000001: timeout: context deadline exceeded (SQLSTATE 57014) after 5s"
	stored := deadletter.EncodeHeaders(amqp.Table{
		"x-error-class": "db_timeout", "x-last-error": text,
		"x-original-exchange": "reservations", "x-original-routing-key": "reservation.expire",
		"x-attempt-history": []any{
			amqp.Table{"at": at.Add(-40 * time.Second), "error_class": "db_timeout", "error": text},
			amqp.Table{"at": at, "error_class": "db_timeout", "error": text},
		},
		"x-death": []any{amqp.Table{
			"count": int64(1), "reason": "expired", "queue": "reservation-expiry.retry.30s",
			"exchange": "", "routing-keys": []any{"reservation-expiry.retry.30s"},
			"time": at.Add(-5 * time.Second), "original-expiration": "30000",
		}},
		"tenant": "acme-eu-1",
	})
	req := Request{ID: 7, ReviewedBy: "bob"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := replayHeaders(stored, req, "alice", 42, 0, at, nil); err != nil {
			b.Fatal(err)
		}
	}
}
