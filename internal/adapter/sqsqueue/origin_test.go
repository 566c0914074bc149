package sqsqueue_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
)

// TestOriginNamedByURLOrNameIsAnARN: a worker that sends a job to the DLQ
// itself may name the queue it failed in by the queue's URL (a Node.js
// worker knows its QueueUrl) or its name; the letter's origin is that
// queue's ARN all the same, the form a replay's target takes, in the
// URL's account and region, or a name's DLQ's. The attribute itself is
// kept as it came; what is no SQS queue's name is no origin.
func TestOriginNamedByURLOrNameIsAnARN(t *testing.T) {
	t.Parallel()
	dlq := sqsqueue.Queue{ARN: "arn:aws:sqs:eu-west-1:111122223333:expiry-dlq"}
	for _, tc := range []struct{ origin, want string }{
		{"https://sqs.us-east-2.amazonaws.com/444455556666/expiry", "arn:aws:sqs:us-east-2:444455556666:expiry"},
		{"http://127.0.0.1:4100/100010001000/expiry", "arn:aws:sqs:eu-west-1:100010001000:expiry"},
		{"expiry.fifo", "arn:aws:sqs:eu-west-1:111122223333:expiry.fifo"},
		{"arn:aws:sqs:eu-west-1:111122223333:expiry", "arn:aws:sqs:eu-west-1:111122223333:expiry"},
		{"not a queue/../x", "not a queue/../x"},
	} {
		m := sqsqueue.Letter(dlq, types.Message{MessageId: aws.String("m-1"), Body: aws.String(`{}`),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"x-original-queue": {DataType: aws.String("String"), StringValue: aws.String(tc.origin)},
				"x-error-class":    {DataType: aws.String("String"), StringValue: aws.String("db_timeout")},
			}})
		l := deadletter.Parse(m, nil, time.Now())
		if l.OriginQueue != tc.want {
			t.Errorf("x-original-queue %q: origin %q, want %q", tc.origin, l.OriginQueue, tc.want)
		}
		if got := m.Headers["x-original-queue"].(deadletter.SQSAttribute).StringValue; got != tc.origin {
			t.Errorf("the attribute was changed to %q", got)
		}
	}
}
