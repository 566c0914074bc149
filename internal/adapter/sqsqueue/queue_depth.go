package sqsqueue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The counts of a queue that SQS keeps, approximately.
var (
	visibleMessages = types.QueueAttributeNameApproximateNumberOfMessages
	hiddenMessages  = types.QueueAttributeNameApproximateNumberOfMessagesNotVisible
	delayedMessages = types.QueueAttributeNameApproximateNumberOfMessagesDelayed
)

// depth is the sum of the counts SQS gives of queue for kinds.
func depth(ctx context.Context, client *sqs.Client, queue Queue, kinds ...types.QueueAttributeName) (int, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue.URL), AttributeNames: kinds})
	if err != nil {
		return 0, fmt.Errorf("read the depth of SQS queue %s: %w", queue.Name, err)
	}
	total := 0
	for _, k := range kinds {
		n, _ := strconv.Atoi(out.Attributes[string(k)])
		total += n
	}
	return total, nil
}
