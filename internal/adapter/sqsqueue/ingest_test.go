package sqsqueue_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
	"github.com/expiryctl/expiryctl/internal/view/letterview"
)

// typedAttributes are one message attribute of each SQS data type, custom
// suffixes included, with values a careless encoding would confuse: a
// Number and a String of the same text, bytes that are not UTF-8.
func typedAttributes() map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		"as-string":  {DataType: aws.String("String"), StringValue: aws.String("42")},
		"as-number":  {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"float":      {DataType: aws.String("Number.float"), StringValue: aws.String("3.25")},
		"json":       {DataType: aws.String("String.json"), StringValue: aws.String(`{"a":[1,"\u00e9"]}`)},
		"blob":       {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xfe, 0xff}},
		"png":        {DataType: aws.String("Binary.png"), BinaryValue: []byte("\x89PNG\r\n")},
		"unicode":    {DataType: aws.String("String"), StringValue: aws.String("r-\u6f22\u5b57 <&>")},
		"$dollar":    {DataType: aws.String("String"), StringValue: aws.String("a key that begins with $")},
		"x-tenant":   {DataType: aws.String("String"), StringValue: aws.String("acme")},
		"x-due-unix": {DataType: aws.String("Number"), StringValue: aws.String("1796494865")},
	}
}

// TestIngestKeepsWhatSQSKnows captures two letters from a real SQS
// server's DLQ — one that SQS's redrive moved there and one that a worker
// sent with the contract's attributes — and reads each back from the
// archive with every attribute and its type, the body byte for byte, and
// SQS's system attributes.
func TestIngestKeepsWhatSQSKnows(t *testing.T) {
	ctx := context.Background()
	client := sqstest.Client(t)
	db := pgtest.New(t)
	work, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)

	body := `{"reservation_id":"r-8421","expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-8421:v3"}`
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(work.URL), MessageBody: aws.String(body),
		MessageAttributes: typedAttributes()}); err != nil {
		t.Fatal(err)
	}
	// Received once and never deleted: SQS's redrive moves it to the DLQ.
	if out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work.URL), WaitTimeSeconds: 5}); err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive from the work queue: %v (%d messages)", err, len(out.Messages))
	}
	workerBody := `{"reservationId":"r-9","expectedVersion":1,"holdUntil":"2026-11-30T12:21:00Z","idempotencyKey":"expire:r-9:v1"}`
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq.URL), MessageBody: aws.String(workerBody),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"x-error-class":     {DataType: aws.String("String"), StringValue: aws.String("db_timeout")},
			"x-last-error":      {DataType: aws.String("String"), StringValue: aws.String("pq: canceling statement due to statement timeout")},
			"x-attempt-history": {DataType: aws.String("String.json"), StringValue: aws.String(`[{"at":"2026-11-30T12:20:01Z","error_class":"db_timeout","error":"first"},{"at":"2026-11-30T12:20:09Z","error_class":"db_timeout","error":"last"}]`)},
			"x-original-queue":  {DataType: aws.String("String"), StringValue: aws.String(work.ARN)},
		}}); err != nil {
		t.Fatal(err)
	}
	waitVisible(t, client, dlq.URL, 2)

	src := openSource(t, client, dlq.URL, 100)
	stats, err := deadletter.Ingest(ctx, db.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test"})
	_ = src.Close()
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if stats.Stored != 2 {
		t.Fatalf("stored %d letters, want 2 (%+v)", stats.Stored, stats)
	}
	if visible, hidden := sqstest.Approximate(t, client, dlq.URL); visible+hidden != 0 {
		t.Errorf("after the ingest the DLQ holds %d visible and %d hidden: stored letters must be deleted", visible, hidden)
	}

	archive := deadletter.NewArchive(db.Pool, "test")
	page, err := archive.List(ctx, deadletter.Filter{}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	byReservation := map[string]deadletter.Detail{}
	for _, r := range page.Rows {
		if r.System != deadletter.SQS || r.SourceQueue != dlq.ARN {
			t.Errorf("letter %d: system %q, queue %q; want sqs, %s", r.ID, r.System, r.SourceQueue, dlq.ARN)
		}
		d, err := archive.Show(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		byReservation[d.ReservationID] = d
	}

	redriven := byReservation["r-8421"]
	if string(redriven.Payload) != body {
		t.Errorf("body %q, want %q", redriven.Payload, body)
	}
	headers, err := deadletter.DecodeSQSAttributes(redriven.Headers)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range typedAttributes() {
		got, ok := headers[name]
		if !ok {
			t.Errorf("attribute %s is missing", name)
			continue
		}
		if got.DataType != aws.ToString(want.DataType) || got.StringValue != aws.ToString(want.StringValue) || !slices.Equal(got.BinaryValue, want.BinaryValue) {
			t.Errorf("attribute %s = %+v, want %s %q %v", name, got, aws.ToString(want.DataType), aws.ToString(want.StringValue), want.BinaryValue)
		}
	}
	if len(headers) != len(typedAttributes()) {
		t.Errorf("%d attributes stored, want %d: %s", len(headers), len(typedAttributes()), redriven.Headers)
	}
	if redriven.Category != deadletter.BrokerLimit || redriven.Attempts < 1 {
		t.Errorf("a letter SQS's redrive moved: category %s, attempts %d; want broker-limit after at least one receive", redriven.Category, redriven.Attempts)
	}
	if redriven.Native["MessageId"] == "" || redriven.Native["ApproximateReceiveCount"] == "" || redriven.Native["SentTimestamp"] == "" {
		t.Errorf("SQS's system attributes were not kept: %v", redriven.Native)
	}
	if redriven.Properties != nil {
		t.Errorf("an SQS letter has AMQP properties: %+v", redriven.Properties)
	}

	worker := byReservation["r-9"]
	if worker.Category != deadletter.TransientExhausted || worker.ErrorClass != "db_timeout" || worker.Attempts != 2 {
		t.Errorf("a worker's letter: category %s, class %q, attempts %d; want transient-exhausted, db_timeout, 2",
			worker.Category, worker.ErrorClass, worker.Attempts)
	}
	if worker.OriginQueue != work.ARN || worker.IdempotencyKey != "expire:r-9:v1" {
		t.Errorf("a worker's letter: origin %q, key %q; want %s, expire:r-9:v1", worker.OriginQueue, worker.IdempotencyKey, work.ARN)
	}
}

// TestRedeliveryIsStoredOnce: a letter whose visibility ran out while its
// batch was being stored comes again with a new receipt and a higher
// receive count; it is stored once.
func TestRedeliveryIsStoredOnce(t *testing.T) {
	ctx := context.Background()
	client := sqstest.Client(t)
	db := pgtest.New(t)
	_, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)
	sendSeq(t, client, dlq.URL, [][]byte{[]byte(`{"reservation_id":"r-1","idempotency_key":"expire:r-1:v1"}`)})

	// A first capture stores the letter and dies before deleting it.
	ref, _ := sqsqueue.ParseQueueRef(dlq.URL)
	queue, err := sqsqueue.FindQueue(ctx, client, ref)
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq.URL), WaitTimeSeconds: 5, VisibilityTimeout: 1,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v (%d)", err, len(out.Messages))
	}
	first := deadletter.Parse(sqsqueue.Letter(queue, out.Messages[0]), nil, time.Now())
	if _, err := deadletter.InsertAs(ctx, db.Pool, "test", queue.ARN, []deadletter.Letter{first}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the visibility runs out

	src := openSource(t, client, dlq.URL, 100)
	stats, err := deadletter.Ingest(ctx, db.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test"})
	_ = src.Close()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Received != 1 || stats.Stored != 0 || stats.Duplicates != 1 {
		t.Errorf("the redelivered copy: %+v; want received 1, stored 0, duplicates 1", stats)
	}
	if visible, hidden := sqstest.Approximate(t, client, dlq.URL); visible+hidden != 0 {
		t.Errorf("the duplicate was not deleted: %d visible, %d hidden", visible, hidden)
	}
}

// waitVisible waits until url shows n visible messages.
func waitVisible(t *testing.T, client *sqs.Client, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		visible, _ := sqstest.Approximate(t, client, url)
		if visible >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages visible in %s, want %d", visible, url, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHostileAttributesAreStoredAsReceived: what SQS would refuse but a
// compatible server takes (a type SQS does not know, names and values with
// terminal escapes, a binary value that is not text) is stored as
// received, comes back with its type, and is shown escaped.
func TestHostileAttributesAreStoredAsReceived(t *testing.T) {
	ctx := context.Background()
	client := sqstest.Client(t)
	db := pgtest.New(t)
	_, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)
	hostile := map[string]types.MessageAttributeValue{
		"odd":              {DataType: aws.String("Foo"), StringValue: aws.String("x")},
		"x-error-class":    {DataType: aws.String("String"), StringValue: aws.String("db_timeout\x1b]0;pwned\x07")},
		"name\x1b[2J":      {DataType: aws.String("String"), StringValue: aws.String("\x1b[31mred\u009b")},
		"blob":             {DataType: aws.String("Binary.raw"), BinaryValue: []byte{0x1b, '[', '2', 'J', 0xff}},
		"x-original-queue": {DataType: aws.String("Number"), StringValue: aws.String("12")},
	}
	body := "{\"reservation_id\":\"r-\x1b[10;10H\"}"
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq.URL), MessageBody: aws.String(body), MessageAttributes: hostile}); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, client, dlq.URL, 10)
	stats, err := deadletter.Ingest(ctx, db.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test"})
	_ = src.Close()
	if err != nil || stats.Stored != 1 {
		t.Fatalf("ingest: %+v, %v", stats, err)
	}
	archive := deadletter.NewArchive(db.Pool, "test")
	page, err := archive.List(ctx, deadletter.Filter{}, nil, 1)
	if err != nil || len(page.Rows) != 1 {
		t.Fatalf("list: %v", err)
	}
	d, err := archive.Show(ctx, page.Rows[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Payload) != body {
		t.Errorf("payload %q, want %q", d.Payload, body)
	}
	attrs, err := deadletter.DecodeSQSAttributes(d.Headers)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range hostile {
		got := attrs[name]
		if got.DataType != aws.ToString(want.DataType) || got.StringValue != aws.ToString(want.StringValue) || !slices.Equal(got.BinaryValue, want.BinaryValue) {
			t.Errorf("attribute %q = %+v, want it as received", name, got)
		}
	}
	out := letterview.Render(d, letterview.Styles{}, letterview.Options{Now: time.Now(), Systems: registry.Systems()})
	if strings.ContainsAny(out, "\x1b\x07\u009b") {
		t.Errorf("dlq show writes raw control characters:\n%q", out)
	}
	for _, want := range []string{`odd: Foo "x"`, `x-original-queue: Number "12"`, `(SQS)`} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, out)
		}
	}
}
