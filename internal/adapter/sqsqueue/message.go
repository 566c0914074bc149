package sqsqueue

import (
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Letter is m, received from queue, as deadletter parses it: the body byte
// for byte, each message attribute with its data type as a header, and
// SQS's system attributes, with the message id, as the letter's native
// attributes.
func Letter(queue Queue, m types.Message) deadletter.Message {
	msg := deadletter.Message{
		System:        deadletter.SQS,
		Queue:         queue.ARN,
		Body:          []byte(aws.ToString(m.Body)),
		MessageID:     aws.ToString(m.MessageId),
		RedriveSource: queue.RedriveSource,
		Headers:       make(map[string]any, len(m.MessageAttributes)),
		Native:        make(map[string]string, len(m.Attributes)+1),
	}
	for name, v := range m.MessageAttributes {
		msg.Headers[name] = deadletter.SQSAttribute{DataType: aws.ToString(v.DataType),
			StringValue: aws.ToString(v.StringValue), BinaryValue: v.BinaryValue}
	}
	for name, v := range m.Attributes {
		msg.Native[name] = v
	}
	msg.Native["MessageId"] = aws.ToString(m.MessageId)
	if v, ok := m.MessageAttributes[originalQueueAttribute]; ok {
		msg.Origin = originARN(queue.ARN, aws.ToString(v.StringValue))
	}
	return msg
}

// originalQueueAttribute is the attribute a worker that sends a job to
// the DLQ itself names the queue it failed in with.
const originalQueueAttribute = "x-original-queue"

// originARN is the ARN of the queue a worker named by its URL or its name
// rather than its ARN (a Node.js worker knows its QueueUrl): a URL's own
// account, and the region its host names, else the DLQ's; a name's the
// DLQ's region and account. Letters and targets name SQS queues by ARN.
// Empty when origin is an ARN already, or no SQS queue's URL or name.
func originARN(dlq, origin string) string {
	region, account, _, ok := arnParts(dlq)
	if !ok || origin == "" || strings.HasPrefix(origin, "arn:") {
		return ""
	}
	if queueName.MatchString(origin) {
		return ARN(region, account, origin)
	}
	ref, err := ParseQueueRef(origin)
	if err != nil || ref.URL == "" {
		return ""
	}
	u, err := url.Parse(ref.URL)
	if err != nil {
		return ""
	}
	if ref.Region != "" {
		region = ref.Region
	}
	return ARN(region, strings.Split(strings.Trim(u.Path, "/"), "/")[0], ref.Name)
}
