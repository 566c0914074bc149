package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
)

// topologyAttributes are what Topology asks of a queue: its ARN, its
// three counts, and its redrive policy, which names its dead-letter
// queue.
var topologyAttributes = []types.QueueAttributeName{
	types.QueueAttributeNameQueueArn, visibleMessages, hiddenMessages, delayedMessages,
	types.QueueAttributeNameRedrivePolicy,
}

// Topology reads what the SQS queue ref names holds now, and its
// dead-letter queue, as the states of work `dlq summary --work-queue`
// shows beside the archive, each queue named by its ARN as letters name
// it:
//
//   - the work queue: ApproximateNumberOfMessages are ready,
//     ApproximateNumberOfMessagesNotVisible (received, neither deleted
//     nor visible again) in flight;
//   - "ARN (delayed)", in the retry role: ApproximateNumberOfMessagesDelayed,
//     the messages sent with a delay that SQS holds back (a worker that
//     retries by sending the job again with DelaySeconds leaves them
//     there);
//   - the dead-letter queue its redrive policy names (deadLetterTargetArn):
//     its messages, ready, delayed or in flight (being captured), are
//     isolated.
//
// SQS's counts are approximate, and SQS keeps no consumers, rates or
// head-of-queue age a client can ask for (the age of the oldest message is
// a CloudWatch metric, not a queue attribute): those stay 0 and nil. A
// queue with no redrive policy, or whose policy names a dead-letter queue
// that no longer exists, has no dead-letter line.
//
// A queue that does not exist gives a *QueueNotFoundError, its text in
// the report's Unavailable too, for a caller that shows rather than maps
// it. Anything else SQS answers, or its silence, is not an error: the
// report's Unavailable says what is missing, as for a broker that cannot
// be reached. The error is ctx's when the caller gave up.
func Topology(ctx context.Context, client *sqs.Client, ref QueueRef) (deadletter.QueueReport, error) {
	region := client.Options().Region
	unavailable := func(err error) (deadletter.QueueReport, error) {
		report := deadletter.QueueReport{Unavailable: err.Error()}
		var missing *QueueNotFoundError
		if errors.As(err, &missing) {
			return report, err
		}
		return report, ctx.Err()
	}
	url, err := queueURL(ctx, client, ref)
	if err != nil {
		return unavailable(err)
	}
	work, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: topologyAttributes})
	if err != nil {
		return unavailable(queueError(ref.Name, region, err))
	}
	arn := work.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		arn = url
	}
	visible, hidden, delayed := queueCounts(work.Attributes)
	queues := []deadletter.QueueState{
		{Name: arn, Role: deadletter.RoleWork, Ready: visible, Unacked: hidden},
		{Name: arn + " (delayed)", Role: deadletter.RoleRetry, Ready: delayed},
	}
	dlqARN, ok := deadLetterTarget(work.Attributes[string(types.QueueAttributeNameRedrivePolicy)])
	if !ok {
		return deadletter.QueueReport{Queues: queues}, nil
	}
	dlqRegion, account, name, ok := arnParts(dlqARN)
	if !ok {
		return deadletter.QueueReport{Queues: queues}, nil
	}
	dlqURL, err := queueURL(ctx, client, QueueRef{Name: name, Region: dlqRegion, Account: account})
	if err == nil {
		var dlq *sqs.GetQueueAttributesOutput
		dlq, err = client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
			AttributeNames: []types.QueueAttributeName{visibleMessages, hiddenMessages, delayedMessages}})
		if err == nil {
			visible, hidden, delayed := queueCounts(dlq.Attributes)
			queues = append(queues, deadletter.QueueState{Name: dlqARN, Role: deadletter.RoleDeadLetter, Ready: visible + delayed, Unacked: hidden})
			return deadletter.QueueReport{Queues: queues}, nil
		}
		err = queueError(name, region, err)
	}
	var missing *QueueNotFoundError
	if errors.As(err, &missing) {
		// The policy outlived its target: the work queue's states stand.
		return deadletter.QueueReport{Queues: queues}, nil
	}
	return unavailable(fmt.Errorf("the dead-letter queue %s of SQS queue %s: %w", dlqARN, arn, err))
}

// queueURL is ref's queue URL: the one given, or SQS's answer for its
// name (in the account an ARN names).
func queueURL(ctx context.Context, client *sqs.Client, ref QueueRef) (string, error) {
	if ref.URL != "" {
		return ref.URL, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(ref.Name)}
	if ref.Account != "" {
		in.QueueOwnerAWSAccountId = aws.String(ref.Account)
	}
	out, err := client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", queueError(ref.Name, client.Options().Region, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// queueCounts reads SQS's three approximate counts of a queue; one SQS
// did not give (an SQS-compatible server that keeps no delayed count) is
// 0.
func queueCounts(attrs map[string]string) (visible, hidden, delayed int64) {
	count := func(name types.QueueAttributeName) int64 {
		n, err := strconv.ParseInt(attrs[string(name)], 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return count(visibleMessages), count(hiddenMessages), count(delayedMessages)
}

// deadLetterTarget is the dead-letter queue's ARN a redrive policy names.
func deadLetterTarget(policy string) (string, bool) {
	if policy == "" {
		return "", false
	}
	var p struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if json.Unmarshal([]byte(policy), &p) != nil || p.DeadLetterTargetArn == "" {
		return "", false
	}
	return p.DeadLetterTargetArn, true
}
