package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// Publisher is the replay runner's broker on SQS (a replay.Broker): it
// sends each message to the queue its RoutingKey names by ARN, with every
// attribute and its type, and settles it when SQS answered. SQS's answer
// to SendMessage is its confirm: the message is stored, or it is not. An
// answer that refuses the message (a queue that does not exist, a message
// SQS will not take) fails the item; no answer at all, after the SDK's
// retries, leaves unknown whether SQS stored it, as a lost channel does on
// RabbitMQ, and the run stops to be resumed.
type Publisher struct {
	// clientFor is the client for a queue's region.
	clientFor func(ctx context.Context, region string) (*sqs.Client, error)
	// sending bounds the SendMessage calls in flight: the runner's window
	// of a thousand unconfirmed messages would otherwise be a thousand
	// calls, most on a connection of their own, which measured slower
	// than 64 (docs/operations.md, replay throughput).
	sending chan struct{}

	mu      sync.Mutex
	queues  map[string]target // by ARN
	clients map[string]*sqs.Client
	sends   sync.WaitGroup
}

// target is a queue found, and the client of its region.
type target struct {
	Queue
	client *sqs.Client
}

// maxSending is how many SendMessage calls a publisher has in flight.
const maxSending = 64

// NewPublisher returns a publisher through client, for every queue
// whatever its region: for one server, such as the tests'.
func NewPublisher(client *sqs.Client) *Publisher {
	return NewRegionalPublisher(func(context.Context, string) (*sqs.Client, error) { return client, nil })
}

// NewRegionalPublisher returns a publisher that reaches each queue
// through the client clientFor gives for the region its ARN names, made
// once per region: a cohort's queues may be in several.
func NewRegionalPublisher(clientFor func(ctx context.Context, region string) (*sqs.Client, error)) *Publisher {
	return &Publisher{clientFor: clientFor, queues: make(map[string]target), clients: make(map[string]*sqs.Client),
		sending: make(chan struct{}, maxSending)}
}

// queue finds the queue arn names, once per publisher; exists is false
// when SQS says there is no such queue.
func (p *Publisher) queue(ctx context.Context, arn string) (q target, exists bool, err error) {
	p.mu.Lock()
	q, ok := p.queues[arn]
	p.mu.Unlock()
	if ok {
		return q, true, nil
	}
	ref, err := ParseQueueRef(arn)
	if err != nil {
		return target{}, false, nil
	}
	client, err := p.client(ctx, ref.Region)
	if err != nil {
		return target{}, false, err
	}
	found, err := FindQueue(ctx, client, ref)
	if err != nil {
		if missingQueue(err) {
			return target{}, false, nil
		}
		return target{}, false, err
	}
	q = target{Queue: found, client: client}
	p.mu.Lock()
	p.queues[arn] = q
	p.mu.Unlock()
	return q, true, nil
}

// client is the client of region, made at its first use.
func (p *Publisher) client(ctx context.Context, region string) (*sqs.Client, error) {
	p.mu.Lock()
	c, ok := p.clients[region]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := p.clientFor(ctx, region)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.clients[region] = c
	p.mu.Unlock()
	return c, nil
}

// Publish implements replay.Broker.
func (p *Publisher) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	sent := &sending{done: make(chan struct{})}
	p.sends.Add(1)
	go func() {
		defer p.sends.Done()
		defer close(sent.done)
		select {
		case p.sending <- struct{}{}:
		case <-ctx.Done():
			// Never sent, as the run stops: its item waits for the run
			// that resumes it, as one whose answer was lost does.
			sent.err = &replay.BrokerLostError{Err: fmt.Errorf("the run stopped before it was sent to SQS: %w", ctx.Err())}
			return
		}
		defer func() { <-p.sending }()
		sent.err = p.send(ctx, m)
	}()
	return sent, nil
}

func (p *Publisher) send(ctx context.Context, m replay.Message) error {
	refuse := func(reason string) error {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
	}
	if m.System != deadletter.SQS || m.Exchange != "" {
		return refuse("not a message for SQS: an SQS replay sends letters captured from SQS to a queue named by its ARN")
	}
	q, exists, err := p.queue(ctx, m.RoutingKey)
	switch {
	case err != nil:
		return &replay.BrokerLostError{Err: err}
	case !exists:
		return refuse("no such SQS queue")
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(m.Body)),
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(m.Attributes))}
	for name, a := range m.Attributes {
		v := types.MessageAttributeValue{DataType: aws.String(a.DataType)}
		if a.Binary() {
			v.BinaryValue = a.BinaryValue
		} else {
			v.StringValue = aws.String(a.StringValue)
		}
		in.MessageAttributes[name] = v
	}
	if wait := time.Until(m.NotBefore); !m.NotBefore.IsZero() && wait > 0 && !q.FIFO {
		// SQS delays a message by whole seconds: rounding up keeps it
		// from coming before its time.
		in.DelaySeconds = int32(min(math.Ceil(wait.Seconds()), replay.SQSMaxDelay.Seconds()))
	}
	if q.FIFO {
		if m.GroupID == "" {
			return refuse("a FIFO queue takes a message only in a message group, and SQS did not say this letter's (MessageGroupId)")
		}
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(m.GroupID), aws.String(m.DeduplicationID)
	}
	if _, err := q.client.SendMessage(ctx, in); err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && !Unreachable(err) {
			return refuse(fmt.Sprintf("SQS refused it: %s: %s", api.ErrorCode(), api.ErrorMessage()))
		}
		return &replay.BrokerLostError{Err: err}
	}
	return nil
}

// ExchangeExists implements replay.Broker: SQS has no exchanges, and an
// SQS target is a queue through the default one.
func (p *Publisher) ExchangeExists(_ context.Context, exchange string) (bool, error) {
	return exchange == "", nil
}

// QueueDepth implements replay.Broker: the messages SQS says are waiting
// in the queue queue names by ARN.
func (p *Publisher) QueueDepth(ctx context.Context, queue string) (messages int, exists bool, err error) {
	q, exists, err := p.queue(ctx, queue)
	if err != nil || !exists {
		return 0, exists, err
	}
	// A message sent with a delivery delay waits too: a run that sends
	// ahead of its time must see the depth it is building.
	n, err := depth(ctx, q.client, q.Queue, visibleMessages, delayedMessages)
	if err != nil {
		if missingQueue(err) {
			return 0, false, nil
		}
		return 0, true, err
	}
	return n, true, nil
}

// Close waits for the sends in flight to settle.
func (p *Publisher) Close() error {
	p.sends.Wait()
	return nil
}

// sending is a message on its way to SQS (a replay.Pending).
type sending struct {
	done chan struct{}
	err  error
}

func (s *sending) Done() <-chan struct{} { return s.done }
func (s *sending) Outcome() error        { return s.err }

// missingQueue says whether err is SQS's answer that a queue does not
// exist.
func missingQueue(err error) bool {
	var missing *QueueNotFoundError
	if errors.As(err, &missing) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		return true
	}
	return false
}
