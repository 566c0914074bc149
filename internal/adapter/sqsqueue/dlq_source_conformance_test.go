package sqsqueue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// TestDLQSourceConformance holds the SQS source to the suite every source
// driver passes.
func TestDLQSourceConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) sourcetest.Harness {
		client := sqstest.Client(t)
		name := sqstest.Name(t, "-dlq")
		url, _ := sqstest.CreateQueue(t, client, name, map[string]string{"VisibilityTimeout": "30"})
		return sourcetest.Harness{
			Publish: func(t *testing.T, bodies [][]byte) { sendSeq(t, client, url, bodies) },
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				return openSource(t, client, url, prefetch)
			},
			Seq: func(m deadletter.Message) (string, bool) {
				a, ok := m.Headers["seq"].(deadletter.SQSAttribute)
				return a.StringValue, ok
			},
		}
	})
}

// sendSeq sends bodies to url in order, each with a String attribute "seq".
func sendSeq(t *testing.T, client *sqs.Client, url string, bodies [][]byte) {
	t.Helper()
	for i, b := range bodies {
		_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(b)),
			MessageAttributes: map[string]types.MessageAttributeValue{"seq": {DataType: aws.String("String"), StringValue: aws.String(strconv.Itoa(i))}}})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// openSource receives url with short polls, so a test need not wait out
// SQS's long one.
func openSource(t *testing.T, client *sqs.Client, url string, prefetch int) *sqsqueue.DLQSource {
	t.Helper()
	ref, err := sqsqueue.ParseQueueRef(url)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqsqueue.FindQueue(context.Background(), client, ref)
	if err != nil {
		t.Fatal(err)
	}
	return sqsqueue.OpenDLQSource(client, queue, sqsqueue.SourceOptions{Prefetch: prefetch, Wait: time.Second})
}
