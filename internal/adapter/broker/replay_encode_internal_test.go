package broker

import (
	"bytes"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// TestReplayPropertiesMoveWhatRabbitMQRefuses: a user_id other than the
// broker's login and a reply_to of the direct reply-to pseudo-queue would
// close the publishing channel; they go as headers instead, and the
// message is always persistent.
func TestReplayPropertiesMoveWhatRabbitMQRefuses(t *testing.T) {
	t.Parallel()
	stored := deadletter.EncodeProperties(deadletter.Properties{ContentType: "application/json", MessageID: "m-1",
		UserID: "booking-svc", ReplyTo: directReplyTo, DeliveryMode: 1})
	p, moved, err := replayProperties(stored, "", "", "expiryctl")
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != "" || p.ReplyTo != "" || p.DeliveryMode != amqp.Persistent || p.MessageID != "m-1" {
		t.Errorf("properties %+v, want no user_id nor reply_to, persistent, the message id kept", p)
	}
	if moved[HeaderOriginalUserID] != "booking-svc" || moved[HeaderOriginalReplyTo] != directReplyTo {
		t.Errorf("moved %v, want the user_id and the reply_to", moved)
	}
	h, err := replayHeaders([]byte(`{}`), []replay.Mark{{Name: replay.HeaderReplayRequest, Value: int64(5)}}, moved)
	if err != nil || h[replay.HeaderReplayRequest] != int64(5) || h[HeaderOriginalUserID] != "booking-svc" {
		t.Errorf("headers %v, %v; want the mark and what the properties could not carry", h, err)
	}
	if p, moved, _ := replayProperties(stored, "", "", "booking-svc"); p.UserID != "booking-svc" || moved[HeaderOriginalUserID] != nil {
		t.Errorf("the login's own user_id: properties %+v, moved %v; want it kept as a property", p, moved)
	}
}

// BenchmarkReplayHeaders is what the runner pays per item to rebuild a
// dead letter's headers: the bookkeeping cut out of the stored JSON, the
// rest decoded with its wire types, the replay's own headers added. The
// stored headers are a reference worker's letter as capture keeps them:
// its error headers, a two-entry attempt history and one x-death entry.
func BenchmarkReplayHeaders(b *testing.B) {
	stored, err := os.ReadFile("testdata/worker_letter_headers.json")
	if err != nil {
		b.Fatal(err)
	}
	stored = bytes.TrimSpace(stored)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	marks := []replay.Mark{{Name: replay.HeaderReplayRequest, Value: int64(7)}, {Name: replay.HeaderReplayCount, Value: int64(1)},
		{Name: replay.HeaderReplayItem, Value: int64(42)}, {Name: replay.HeaderReplayedBy, Value: "alice"},
		{Name: replay.HeaderApprovedBy, Value: "bob"}, {Name: replay.HeaderReplayedAt, Value: at}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := replayHeaders(replay.Stripped(stored), marks, nil); err != nil {
			b.Fatal(err)
		}
	}
}
