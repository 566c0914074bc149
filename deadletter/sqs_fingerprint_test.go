package deadletter_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestSQSFingerprint: a redelivery of one SQS message is one letter; two
// dead-letterings of a job by SQS's redrive are two, though they read the
// same; two copies of one worker dead-lettering (it died between sending
// to the DLQ and deleting the original) are one, though SQS gave each its
// own id.
func TestSQSFingerprint(t *testing.T) {
	now := time.Now()
	body := []byte(`{"reservation_id":"r-1","idempotency_key":"expire:r-1:v1"}`)
	redriven := func(id, receives string) deadletter.Message {
		return deadletter.Message{System: deadletter.SQS, Queue: "arn:aws:sqs:us-east-1:1:q-dlq", Body: body, MessageID: id,
			Headers: map[string]any{"x-tenant": deadletter.SQSAttribute{DataType: "String", StringValue: "acme"}},
			Native:  map[string]string{"MessageId": id, "ApproximateReceiveCount": receives, "SentTimestamp": "1796000000" + receives}}
	}
	byWorker := func(id string) deadletter.Message {
		m := redriven(id, "1")
		m.Headers = map[string]any{"x-error-class": deadletter.SQSAttribute{DataType: "String", StringValue: "db_timeout"}}
		return m
	}
	fp := func(m deadletter.Message) [32]byte { return deadletter.Parse(m, nil, now).Fingerprint }
	if fp(redriven("m-1", "4")) != fp(redriven("m-1", "5")) {
		t.Error("a redelivery of one message (its receive count and times moved on) is a second letter")
	}
	if fp(redriven("m-1", "4")) == fp(redriven("m-2", "4")) {
		t.Error("two redrives of one job are taken for one letter: the second death would be skipped as a duplicate")
	}
	if fp(byWorker("m-1")) != fp(byWorker("m-2")) {
		t.Error("two copies of one worker dead-lettering are two letters")
	}
}
