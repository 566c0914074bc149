package sqsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestPublisherBatchSettlesEachByItsAnswer: the publisher sends a queue's
// waiting messages in SendMessageBatch calls, and through calls refused,
// and answers lost before and after SQS stored the messages, a message
// settles confirmed only when it is in the queue, and refused only when it
// is not; the rest are unknown, as a lost channel leaves them on RabbitMQ.
func TestPublisherBatchSettlesEachByItsAnswer(t *testing.T) {
	awsEnv(t)
	seed := faultSeed(t)
	ctx := context.Background()
	direct := sqstest.Client(t)
	url, arn := sqstest.CreateQueue(t, direct, sqstest.Name(t, "-work"), nil)
	proxy := sqstest.NewFaultProxy(t, sqstest.Endpoint(), seed)
	// The first calls are refused, as SQS refuses a call it will never
	// take, whatever its attempt; the others meet faults the SDK retries.
	// A refusal on a retry could not say whether an earlier attempt's lost
	// answer had stored the messages.
	proxy.Inject(sqstest.FaultRule{Ops: []string{"SendMessageBatch"}, Next: 3, Faults: []sqstest.Fault{{Kind: sqstest.Denied}}})
	proxy.Inject(sqstest.FaultRule{Ops: []string{"SendMessageBatch"}, Rate: 0.3, Faults: []sqstest.Fault{
		{Kind: sqstest.Reset}, {Kind: sqstest.Reset, After: true}, {Kind: sqstest.InternalError, After: true}, {Kind: sqstest.Unavailable},
	}})
	client, _ := proxiedClient(t, proxy, url)
	p := sqsqueue.NewPublisher(client)

	const n = 400
	pending := make([]replay.Pending, n)
	var err error
	for i := range n {
		if pending[i], err = p.Publish(ctx, replay.Message{System: deadletter.SQS, RoutingKey: arn,
			Body: fmt.Appendf(nil, `{"reservation_id":"r-%d"}`, i),
			Wire: sqsqueue.Wire{Attributes: map[string]deadletter.SQSAttribute{"seq": {DataType: "Number", StringValue: fmt.Sprint(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	confirmed, refused, unknown := map[string]bool{}, map[string]bool{}, 0
	for i, pe := range pending {
		select {
		case <-pe.Done():
		case <-time.After(time.Minute):
			t.Fatalf("message %d did not settle in a minute", i)
		}
		var failure *replay.PublishFailure
		var lost *replay.BrokerLostError
		switch err := pe.Outcome(); {
		case err == nil:
			confirmed[fmt.Sprint(i)] = true
		case errors.As(err, &failure):
			refused[fmt.Sprint(i)] = true
		case errors.As(err, &lost):
			unknown++
		default:
			t.Errorf("message %d settled as %v, want confirmed, a *replay.PublishFailure or a *replay.BrokerLostError", i, err)
		}
	}
	_ = p.Close()
	stats := proxy.Stats()
	proxy.Clear()
	t.Logf("%d confirmed, %d refused, %d unknown; proxy: %s", len(confirmed), len(refused), unknown, stats)

	arrived := map[string]int{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		out, err := direct.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 && len(arrived) >= len(confirmed) {
			break
		}
		for _, m := range out.Messages {
			arrived[aws.ToString(m.MessageAttributes["seq"].StringValue)]++
			if _, err := direct.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for seq := range confirmed {
		if arrived[seq] == 0 {
			t.Errorf("message %s settled confirmed but is not in the queue", seq)
		}
	}
	for seq := range refused {
		if arrived[seq] > 0 {
			t.Errorf("message %s settled refused but is in the queue", seq)
		}
	}
	if calls := stats.Requests["SendMessageBatch"]; calls == 0 || calls > n/4 {
		t.Errorf("%d SendMessageBatch calls, retries included, for %d messages: want them sent in batches", calls, n)
	}
	if len(confirmed) == 0 || len(refused) == 0 {
		t.Errorf("%d confirmed and %d refused: want both, the faults drawn both ways", len(confirmed), len(refused))
	}
}

// TestPublishAfterCloseSettles: a message published after Close, with no
// batcher left to send it, settles at once as unsent rather than waiting
// for ever.
func TestPublishAfterCloseSettles(t *testing.T) {
	client := sqstest.Client(t)
	_, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, "-work"), nil)
	p := sqsqueue.NewPublisher(client)
	publish := func() error {
		pe, err := p.Publish(context.Background(), replay.Message{System: deadletter.SQS, RoutingKey: arn, Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-pe.Done():
			return pe.Outcome()
		case <-time.After(10 * time.Second):
			t.Fatal("the message did not settle in 10 s")
			return nil
		}
	}
	if err := publish(); err != nil {
		t.Fatalf("before Close: %v, want confirmed", err)
	}
	_ = p.Close()
	var lost *replay.BrokerLostError
	if err := publish(); !errors.As(err, &lost) {
		t.Errorf("after Close: %v, want a *replay.BrokerLostError", err)
	}
}
