package sqsqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestPublisherConformance holds the SQS publisher to the suite every
// target driver passes.
func TestPublisherConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) brokertest.Harness {
		client := sqstest.Client(t)
		url, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, "-work"), nil)
		missing := sqsqueue.ARN("us-east-1", "100010001000", sqstest.Name(t, "-missing"))
		p := sqsqueue.NewPublisher(client)
		t.Cleanup(func() { _ = p.Close() })
		message := func(to string) func(body []byte, seq string) replay.Message {
			return func(body []byte, seq string) replay.Message {
				w := sqsqueue.Wire{Attributes: map[string]deadletter.SQSAttribute{}}
				if seq != "" {
					w.Attributes["seq"] = deadletter.SQSAttribute{DataType: "String", StringValue: seq}
				}
				return replay.Message{System: deadletter.SQS, RoutingKey: to, Body: body, Wire: w}
			}
		}
		return brokertest.Harness{
			Broker: p, Message: message(arn),
			Missing: func(body []byte) replay.Message { return message(missing)(body, "") },
			Queue:   arn, MissingQueue: missing,
			Receive: func(t *testing.T, n int) []brokertest.Received {
				var got []brokertest.Received
				deadline := time.Now().Add(30 * time.Second)
				for len(got) < n && time.Now().Before(deadline) {
					out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
						MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range out.Messages {
						got = append(got, brokertest.Received{Body: []byte(aws.ToString(m.Body)), Seq: aws.ToString(m.MessageAttributes["seq"].StringValue)})
						if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
							t.Fatal(err)
						}
					}
				}
				if len(got) < n {
					t.Fatalf("received %d of %d", len(got), n)
				}
				return got
			},
		}
	})
}

// TestPublisherFIFO: a replay to a FIFO queue keeps the letter's message
// group and sends the request's deduplication id; a letter whose group
// SQS did not say fails its item rather than going out without one.
func TestPublisherFIFO(t *testing.T) {
	client := sqstest.Client(t)
	_, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, ".fifo"), nil)
	p := sqsqueue.NewPublisher(client)
	defer p.Close()
	ctx := context.Background()
	send := func(group string) error {
		pending, err := p.Publish(ctx, replay.Message{System: deadletter.SQS, RoutingKey: arn, Body: []byte(`{"reservation_id":"r-1"}`),
			Wire: sqsqueue.Wire{GroupID: group, DeduplicationID: "expiryctl-replay-7-1"}})
		if err != nil {
			t.Fatal(err)
		}
		<-pending.Done()
		return pending.Outcome()
	}
	if err := send("reservation-r-1"); err != nil {
		t.Errorf("a FIFO message with its group: %v, want confirmed", err)
	}
	var failure *replay.PublishFailure
	if err := send(""); err == nil || !errors.As(err, &failure) {
		t.Errorf("a FIFO message with no group: %v, want a *replay.PublishFailure", err)
	}
}

// TestPublisherRefusedMessageFailsItsItem: a message SQS will not take (a
// body over its size limit) fails its item with SQS's reason; the run goes
// on with the rest.
func TestPublisherRefusedMessageFailsItsItem(t *testing.T) {
	client := sqstest.Client(t)
	_, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, "-big"), nil)
	p := sqsqueue.NewPublisher(client)
	defer p.Close()
	body := append([]byte(`{"reservation_id":"r-big","pad":"`), make([]byte, 300<<10)...)
	for i := len(body) - 300<<10; i < len(body); i++ {
		body[i] = 'x'
	}
	body = append(body, `"}`...)
	pending, err := p.Publish(context.Background(), replay.Message{System: deadletter.SQS, RoutingKey: arn, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	<-pending.Done()
	var failure *replay.PublishFailure
	if err := pending.Outcome(); !errors.As(err, &failure) || !strings.Contains(failure.Reason, "SQS refused it") {
		t.Errorf("a 300 KiB body: %v, want the item failed with SQS's reason", err)
	}
}

// TestPublisherReachesEachQueueInItsRegion: a cohort's queues may be in
// several regions; each is reached through its region's client, made once.
func TestPublisherReachesEachQueueInItsRegion(t *testing.T) {
	client := sqstest.Client(t)
	_, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, "-work"), nil)
	// goaws finds a queue by its name, whatever region its ARN says.
	elsewhere := strings.Replace(arn, ":us-east-1:", ":eu-west-1:", 1)
	asked := map[string]int{}
	p := sqsqueue.NewRegionalPublisher(func(_ context.Context, region string) (*sqs.Client, error) {
		asked[region]++
		return client, nil
	})
	defer p.Close()
	for _, to := range []string{arn, elsewhere, arn, elsewhere} {
		pending, err := p.Publish(context.Background(), replay.Message{System: deadletter.SQS, RoutingKey: to, Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		<-pending.Done()
		if err := pending.Outcome(); err != nil {
			t.Errorf("to %s: %v", to, err)
		}
	}
	if asked["us-east-1"] != 1 || asked["eu-west-1"] != 1 || len(asked) != 2 {
		t.Errorf("clients asked for %v, want one for each of us-east-1 and eu-west-1", asked)
	}
}
