package sqsqueue

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/replay"
)

// TestSettleAnswersByEntry: each message of a SendMessageBatch call is
// settled by SQS's answer for it alone, and only an answer that lists it
// once as stored confirms it. Nothing of SQS's is under test here, only
// how its documented answer is read, so the answer is written out.
func TestSettleAnswersByEntry(t *testing.T) {
	const arn = "arn:aws:sqs:us-east-1:100010001000:work"
	batch := make([]*entry, 6)
	for i := range batch {
		batch[i] = &entry{arn: arn, sent: &sending{done: make(chan struct{}), settled: func() {}}}
	}
	settleAnswers(batch, &sqs.SendMessageBatchOutput{
		Successful: []types.SendMessageBatchResultEntry{{Id: aws.String("0")}, {Id: aws.String("4")}, {Id: aws.String("9")}, {Id: aws.String("x")}},
		Failed: []types.BatchResultErrorEntry{
			{Id: aws.String("1"), SenderFault: true, Code: aws.String("InvalidParameterValue"), Message: aws.String("too long")},
			{Id: aws.String("2"), SenderFault: false, Code: aws.String("InternalError")},
			{Id: aws.String("4"), SenderFault: false, Code: aws.String("InternalError")},
		},
	})
	var failure *replay.PublishFailure
	var lost *replay.BrokerLostError
	for i, want := range []string{"confirmed", "refused", "unknown", "unknown", "unknown", "unknown"} {
		select {
		case <-batch[i].sent.Done():
		default:
			t.Fatalf("entry %d was not settled", i)
		}
		err := batch[i].sent.Outcome()
		got := "unknown"
		switch {
		case err == nil:
			got = "confirmed"
		case errors.As(err, &failure):
			got = "refused"
			if failure.RoutingKey != arn || !strings.Contains(failure.Reason, "InvalidParameterValue: too long") {
				t.Errorf("entry %d refused as %+v, want its queue and SQS's code and message", i, failure)
			}
		case !errors.As(err, &lost):
			got = err.Error()
		}
		if got != want {
			t.Errorf("entry %d: %s (%v), want %s", i, got, err, want)
		}
	}
}
