package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/singleflight"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// Publisher is the replay runner's broker on SQS (a replay.Broker): it
// sends each message to the queue its RoutingKey names by ARN, with every
// attribute and its type, and settles it when SQS answered. SQS's answer
// is its confirm: the message is stored, or it is not. An answer that
// refuses the message (a queue that does not exist, a message SQS will not
// take) fails the item; no answer at all, after the SDK's retries, leaves
// unknown whether SQS stored it, as a lost channel does on RabbitMQ, and
// the run stops to be resumed.
//
// Messages to one queue go out in SendMessageBatch calls of up to ten,
// each entry answered on its own: a call takes the messages that come
// within batchLinger of the first, so at a run's full speed calls carry
// ten, and a message sent alone waits 2 ms. One call a message cost about
// seven times the CPU a message, in SQS and in this process
// (docs/operations.md, replay throughput).
type Publisher struct {
	// clientFor is the client for a queue's region.
	clientFor func(ctx context.Context, region string) (*sqs.Client, error)
	// sending bounds the calls in flight: the runner's window of a
	// thousand unconfirmed messages would otherwise be a hundred calls or
	// more, most on a connection of their own, which measured slower than
	// 64 (docs/operations.md, replay throughput).
	sending chan struct{}
	// stop ends the batchers, once Close has seen every message settled.
	stop     chan struct{}
	stopOnce sync.Once

	// finding makes the messages to a queue not yet found wait for one
	// look-up, not each make its own.
	finding singleflight.Group

	mu       sync.Mutex
	queues   map[string]target // by ARN
	clients  map[string]*sqs.Client
	batchers map[string]*batcher // by queue URL
	sends    sync.WaitGroup
}

// target is a queue found, and the client of its region.
type target struct {
	Queue
	client *sqs.Client
}

// maxSending is how many calls a publisher has in flight.
const maxSending = 64

// maxBatchBytes is below the most bytes of bodies and attributes SQS
// takes in one call (256 KiB); a message this publisher counts larger
// goes out alone.
const maxBatchBytes = 240 << 10

// batchLinger is how long a call waits for more messages to fill it: a
// run publishes its window a message at a time, and a call sent at once
// would carry one or two.
const batchLinger = 2 * time.Millisecond

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
		batchers: make(map[string]*batcher), sending: make(chan struct{}, maxSending), stop: make(chan struct{})}
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
	type found struct {
		q      target
		exists bool
	}
	v, err, _ := p.finding.Do(arn, func() (any, error) {
		q, exists, err := p.find(ctx, arn)
		return found{q, exists}, err
	})
	f, _ := v.(found)
	return f.q, f.exists, err
}

// find looks the queue arn names up, and keeps it when it exists.
func (p *Publisher) find(ctx context.Context, arn string) (q target, exists bool, err error) {
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
	sent := &sending{done: make(chan struct{}), settled: p.sends.Done}
	p.sends.Add(1)
	go func() {
		q, in, err := p.prepare(ctx, m)
		switch {
		case err != nil:
			sent.settle(err)
		case messageBytes(in) > maxBatchBytes:
			p.sendAlone(ctx, q, m.RoutingKey, in, sent)
		default:
			p.batcherFor(q).add(ctx, &entry{ctx: ctx, arn: m.RoutingKey, in: in, sent: sent})
		}
	}()
	return sent, nil
}

// prepare finds m's queue and makes its SendMessage input, or says why m
// cannot go to SQS.
func (p *Publisher) prepare(ctx context.Context, m replay.Message) (target, *sqs.SendMessageInput, error) {
	refuse := func(reason string) error {
		return &replay.PublishFailure{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Reason: reason}
	}
	if m.System != deadletter.SQS || m.Exchange != "" {
		return target{}, nil, refuse("not a message for SQS: an SQS replay sends letters captured from SQS to a queue named by its ARN")
	}
	q, exists, err := p.queue(ctx, m.RoutingKey)
	switch {
	case err != nil:
		return target{}, nil, &replay.BrokerLostError{Err: err}
	case !exists:
		return target{}, nil, refuse("no such SQS queue")
	}
	w, _ := m.Wire.(Wire)
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(m.Body)),
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(w.Attributes))}
	for name, a := range w.Attributes {
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
		in.DelaySeconds = int32(min(math.Ceil(wait.Seconds()), MaxDelay.Seconds()))
	}
	if q.FIFO {
		if w.GroupID == "" {
			return target{}, nil, refuse("a FIFO queue takes a message only in a message group, and SQS did not say this letter's (MessageGroupId)")
		}
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(w.GroupID), aws.String(w.DeduplicationID)
	}
	return q, in, nil
}

// messageBytes is what in counts toward a call's size limit: its body and
// its attributes' names, types and values.
func messageBytes(in *sqs.SendMessageInput) int {
	n := len(aws.ToString(in.MessageBody))
	for name, v := range in.MessageAttributes {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// sendAlone sends in with a SendMessage call of its own, in one of the
// publisher's slots.
func (p *Publisher) sendAlone(ctx context.Context, q target, arn string, in *sqs.SendMessageInput, sent *sending) {
	select {
	case p.sending <- struct{}{}:
	case <-ctx.Done():
		sent.settle(notSent(ctx))
		return
	}
	defer func() { <-p.sending }()
	_, err := q.client.SendMessage(ctx, in)
	sent.settle(sendOutcome(arn, err))
}

// sendOutcome is what a call's error says of the messages it carried: SQS
// refused them (their items fail), or no answer came (unknown whether SQS
// stored them; the run stops).
func sendOutcome(arn string, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && !Unreachable(err) {
		return refused(arn, api.ErrorCode(), api.ErrorMessage())
	}
	return &replay.BrokerLostError{Err: err}
}

// refused is SQS's refusal of a message to the queue arn names.
func refused(arn, code, message string) error {
	return &replay.PublishFailure{RoutingKey: arn, Reason: fmt.Sprintf("SQS refused it: %s: %s", code, message)}
}

// notSent is the outcome of a message the run stopped before it went out:
// its item waits for the run that resumes it, as one whose answer was lost
// does.
func notSent(ctx context.Context) error {
	return &replay.BrokerLostError{Err: fmt.Errorf("the run stopped before it was sent to SQS: %w", ctx.Err())}
}

// batcherFor is q's batcher, started at its first message.
func (p *Publisher) batcherFor(q target) *batcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.batchers[q.URL]
	if !ok {
		b = &batcher{p: p, q: q, entries: make(chan *entry, 1024)}
		p.batchers[q.URL] = b
		go b.loop()
	}
	return b
}

// entry is a message waiting for its batch.
type entry struct {
	ctx  context.Context
	arn  string // the queue, as the message named it
	in   *sqs.SendMessageInput
	sent *sending
}

// batcher gathers the messages to one queue into SendMessageBatch calls.
type batcher struct {
	p       *Publisher
	q       target
	entries chan *entry
}

// add queues e for the next call. A publisher closed has no batcher
// reading: its messages settle at once, unsent.
func (b *batcher) add(ctx context.Context, e *entry) {
	select {
	case <-b.p.stop:
		e.sent.settle(&replay.BrokerLostError{Err: errors.New("the SQS publisher was closed before this message was sent")})
		return
	default:
	}
	select {
	case b.entries <- e:
	case <-ctx.Done():
		e.sent.settle(notSent(ctx))
	}
}

// loop waits for a message and a free slot, then sends it with the
// messages that come within batchLinger, up to maxBatch and
// maxBatchBytes.
func (b *batcher) loop() {
	var next *entry
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-b.entries:
			case <-b.p.stop:
				return
			}
		}
		select {
		case b.p.sending <- struct{}{}:
		case <-first.ctx.Done():
			first.sent.settle(notSent(first.ctx))
			continue
		}
		batch, size := []*entry{first}, messageBytes(first.in)
		linger := time.NewTimer(batchLinger)
	gather:
		for len(batch) < maxBatch {
			select {
			case e := <-b.entries:
				if e.ctx.Err() != nil {
					e.sent.settle(notSent(e.ctx))
					continue
				}
				if n := messageBytes(e.in); size+n <= maxBatchBytes {
					batch, size = append(batch, e), size+n
					continue
				}
				next = e
				break gather
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		go func() {
			defer func() { <-b.p.sending }()
			b.send(batch)
		}()
	}
}

// send makes one SendMessageBatch call of batch and settles each entry by
// its own answer. An entry SQS failed on its side (not the sender's
// fault), or one its answer does not name, is unknown, as a lost answer
// is; a call SQS found too long sends each alone.
func (b *batcher) send(batch []*entry) {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(b.q.URL), Entries: make([]types.SendMessageBatchRequestEntry, len(batch))}
	for i, e := range batch {
		in.Entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: e.in.MessageBody,
			MessageAttributes: e.in.MessageAttributes, DelaySeconds: e.in.DelaySeconds,
			MessageGroupId: e.in.MessageGroupId, MessageDeduplicationId: e.in.MessageDeduplicationId}
	}
	out, err := b.q.client.SendMessageBatch(batch[0].ctx, in)
	if err != nil {
		var tooLong *types.BatchRequestTooLong
		if errors.As(err, &tooLong) && len(batch) > 1 {
			for _, e := range batch {
				_, err := b.q.client.SendMessage(e.ctx, e.in)
				e.sent.settle(sendOutcome(e.arn, err))
			}
			return
		}
		for _, e := range batch {
			e.sent.settle(sendOutcome(e.arn, err))
		}
		return
	}
	settleAnswers(batch, out)
}

// settleAnswers settles each entry of batch by SQS's answer for it: stored
// (confirmed), failed as the sender's fault (refused: the item fails), or
// failed on SQS's side or not named at all (unknown, as a lost answer is).
func settleAnswers(batch []*entry, out *sqs.SendMessageBatchOutput) {
	outcomes, named := make([]func(e *entry) error, len(batch)), make([]int, len(batch))
	answer := func(id string, outcome func(e *entry) error) {
		if i, err := strconv.Atoi(id); err == nil && i >= 0 && i < len(batch) {
			outcomes[i] = outcome
			named[i]++
		}
	}
	for _, ok := range out.Successful {
		answer(aws.ToString(ok.Id), func(*entry) error { return nil })
	}
	for _, f := range out.Failed {
		code, message, sender := aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault
		answer(aws.ToString(f.Id), func(e *entry) error {
			if sender {
				return refused(e.arn, code, message)
			}
			return &replay.BrokerLostError{Err: fmt.Errorf("SQS failed to store it on its side: %s: %s", code, message)}
		})
	}
	for i, e := range batch {
		switch named[i] {
		case 0:
			e.sent.settle(&replay.BrokerLostError{Err: errors.New("SQS's answer to SendMessageBatch does not name this message")})
		case 1:
			e.sent.settle(outcomes[i](e))
		default:
			e.sent.settle(&replay.BrokerLostError{Err: errors.New("SQS's answer to SendMessageBatch names this message more than once")})
		}
	}
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
	p.stopOnce.Do(func() { close(p.stop) })
	return nil
}

// sending is a message on its way to SQS (a replay.Pending).
type sending struct {
	done    chan struct{}
	err     error
	settled func()
}

// settle gives the message its outcome, once.
func (s *sending) settle(err error) {
	s.err = err
	close(s.done)
	s.settled()
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
