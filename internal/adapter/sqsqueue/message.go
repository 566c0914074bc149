package sqsqueue

import (
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
	return msg
}
