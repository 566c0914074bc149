package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/expiryctl/expiryctl/deadletter"
)

// SQS's limits on one call.
const (
	maxReceive = 10 // messages one ReceiveMessage returns
	maxBatch   = 10 // entries of one SendMessageBatch, DeleteMessageBatch or ChangeMessageVisibilityBatch
	// longPoll is how long one ReceiveMessage waits for a message: SQS's
	// longest, so an idle capture costs a call every 20 seconds.
	longPoll = 20
	// receiveGrace is how long past its long poll a receive may take,
	// retries included, before the server counts as lost.
	receiveGrace = 40 * time.Second
	// extendConcurrency is how many single visibility calls go at once
	// where the batch call is refused: one slow call must not hold back
	// the others' extensions.
	extendConcurrency = 8
)

// DLQSource receives one SQS dead-letter queue for deadletter.Ingest. It
// deletes a message only when the ingest acknowledges it, after the batch
// that stored it committed; until then it keeps the message hidden from
// other consumers by extending its visibility, so a slow database never
// lets SQS hand it to someone else, and a crash lets SQS hand it out again
// once the visibility runs out, to be stored once by its fingerprint.
// Several sources on the same queue, in one process or many, compete for
// messages as SQS consumers do.
type DLQSource struct {
	client     *sqs.Client
	queue      Queue
	visibility time.Duration
	deliveries chan deadletter.Delivery
	// room bounds the messages held and not yet deleted (the prefetch).
	room   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu   sync.Mutex
	next uint64
	held map[uint64]*heldMessage
	// handing counts messages received and not yet on Deliveries: with
	// the queue's visible count, what Ready reports.
	handing int
	err     error
	// singleVisibility is set once the server refused the batch call, as
	// some SQS-compatible servers do: each message is then extended alone.
	singleVisibility bool
	closeOnce        sync.Once
}

type heldMessage struct {
	receipt  string
	received time.Time
	extended time.Time
}

// SourceOptions tunes a DLQSource.
type SourceOptions struct {
	// Prefetch is the most messages held at once, received and not yet
	// deleted (at least 10).
	Prefetch int
	// Visibility is how long SQS hides a received message before it may
	// hand it out again; it is extended while the message is held. Zero
	// means the queue's own visibility timeout.
	Visibility time.Duration
	// Wait is how long one receive waits for a message (default and at
	// most 20 s).
	Wait time.Duration
}

// OpenDLQSource starts receiving queue. The queue must exist (FindQueue).
func OpenDLQSource(client *sqs.Client, queue Queue, opts SourceOptions) *DLQSource {
	prefetch := max(opts.Prefetch, maxReceive)
	visibility := opts.Visibility
	if visibility <= 0 {
		visibility = queue.Visibility
	}
	visibility = max(visibility, 3*time.Second)
	wait := int32(longPoll)
	if opts.Wait > 0 && opts.Wait < longPoll*time.Second {
		wait = int32(max(opts.Wait/time.Second, 1))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &DLQSource{client: client, queue: queue, visibility: visibility,
		deliveries: make(chan deadletter.Delivery, maxReceive), room: make(chan struct{}, prefetch),
		ctx: ctx, cancel: cancel, held: make(map[uint64]*heldMessage)}
	s.done.Add(2)
	go s.receive(wait)
	go s.keepHidden()
	return s
}

// QueueName is the queue's ARN, as letters and the audit trail name it.
func (s *DLQSource) QueueName() string { return s.queue.ARN }

// Deliveries implements deadletter.Source.
func (s *DLQSource) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Err says why the deliveries ended when SQS failed them; nil when they
// were closed.
func (s *DLQSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *DLQSource) receive(wait int32) {
	defer s.done.Done()
	defer close(s.deliveries)
	for {
		// Take room for at least one message before asking for any.
		select {
		case s.room <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		n := 1
		for n < maxReceive {
			select {
			case s.room <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		// A server that takes the connection and never answers is a
		// lost server, not a quiet queue: the call is bounded by the long
		// poll and some.
		call, cancel := context.WithTimeout(s.ctx, time.Duration(wait)*time.Second+receiveGrace)
		out, err := s.client.ReceiveMessage(call, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.queue.URL), MaxNumberOfMessages: int32(n), WaitTimeSeconds: wait,
			VisibilityTimeout:           int32(s.visibility / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		cancel()
		if err != nil {
			s.free(n)
			if s.ctx.Err() == nil {
				s.mu.Lock()
				s.err = fmt.Errorf("receive from SQS queue %s: %w", s.queue.Name, err)
				s.mu.Unlock()
			}
			return
		}
		s.free(n - len(out.Messages))
		now := time.Now()
		s.mu.Lock()
		first := s.next + 1
		for _, m := range out.Messages {
			s.next++
			s.held[s.next] = &heldMessage{receipt: aws.ToString(m.ReceiptHandle), received: now, extended: now}
		}
		s.handing += len(out.Messages)
		s.mu.Unlock()
		for i, m := range out.Messages {
			d := deadletter.Delivery{Message: Letter(s.queue, m), Tag: first + uint64(i)}
			select {
			case s.deliveries <- d:
				s.mu.Lock()
				s.handing--
				s.mu.Unlock()
			case <-s.ctx.Done():
				return
			}
		}
	}
}

// free returns room for n messages.
func (s *DLQSource) free(n int) {
	for range n {
		<-s.room
	}
}

// Acknowledge implements deadletter.Source: it deletes every held message
// up to and including tag, ten to a call. A message whose receipt no
// longer holds (its visibility ran out and SQS handed it out again) is not
// an error: its next copy is stored once, by its fingerprint.
func (s *DLQSource) Acknowledge(tag uint64) error {
	s.mu.Lock()
	tags := make([]uint64, 0, len(s.held))
	for t := range s.held {
		if t <= tag {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	entries := make([]types.DeleteMessageBatchRequestEntry, len(tags))
	for i, t := range tags {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.FormatUint(t, 10)), ReceiptHandle: aws.String(s.held[t].receipt)}
	}
	s.mu.Unlock()

	var g errgroup.Group
	g.SetLimit(4)
	for chunk := range slices.Chunk(entries, maxBatch) {
		g.Go(func() error {
			// Deleting what is stored finishes even as the capture stops.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := s.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.queue.URL), Entries: chunk})
			if err != nil {
				return fmt.Errorf("delete stored letters from SQS queue %s: %w", s.queue.Name, err)
			}
			// A failed entry is let go too: it is stored, and if SQS still
			// has it, SQS hands it out again when its visibility runs out,
			// to be skipped as a duplicate and deleted then.
			s.mu.Lock()
			for _, e := range chunk {
				t, _ := strconv.ParseUint(aws.ToString(e.Id), 10, 64)
				delete(s.held, t)
			}
			s.mu.Unlock()
			s.free(len(chunk))
			return nil
		})
	}
	return g.Wait()
}

// keepHidden extends the visibility of held messages a third of the way
// through it, so that none is handed to another consumer while its batch
// is stored.
func (s *DLQSource) keepHidden() {
	defer s.done.Done()
	tick := time.NewTicker(s.visibility / 6)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		due := time.Now().Add(-s.visibility / 3)
		s.mu.Lock()
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for t, h := range s.held {
			if h.extended.Before(due) {
				entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.FormatUint(t, 10)),
					ReceiptHandle: aws.String(h.receipt), VisibilityTimeout: int32(s.visibility / time.Second)})
			}
		}
		single := s.singleVisibility
		s.mu.Unlock()
		// An extension that comes after the visibility ran out is no use:
		// each round is bounded by half of it.
		round, cancel := context.WithTimeout(s.ctx, s.visibility/2)
		extended := s.extend(round, entries, single)
		cancel()
		now := time.Now()
		s.mu.Lock()
		for _, t := range extended {
			if h, ok := s.held[t]; ok {
				h.extended = now
			}
		}
		s.mu.Unlock()
	}
}

// extend extends the visibility of entries and returns the tags it
// extended; a message it could not extend is tried again on the next tick
// and, failing that, handed out again by SQS and stored once.
func (s *DLQSource) extend(ctx context.Context, entries []types.ChangeMessageVisibilityBatchRequestEntry, single bool) []uint64 {
	var done []uint64
	for chunk := range slices.Chunk(entries, maxBatch) {
		if !single {
			out, err := s.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.queue.URL), Entries: chunk})
			if err == nil {
				for _, ok := range out.Successful {
					t, _ := strconv.ParseUint(aws.ToString(ok.Id), 10, 64)
					done = append(done, t)
				}
				continue
			}
			if !unsupported(err) {
				continue
			}
			single = true
			s.mu.Lock()
			s.singleVisibility = true
			s.mu.Unlock()
		}
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(extendConcurrency)
		for _, e := range chunk {
			g.Go(func() error {
				_, err := s.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(s.queue.URL),
					ReceiptHandle: e.ReceiptHandle, VisibilityTimeout: e.VisibilityTimeout})
				if err == nil {
					t, _ := strconv.ParseUint(aws.ToString(e.Id), 10, 64)
					mu.Lock()
					done = append(done, t)
					mu.Unlock()
				}
				return nil
			})
		}
		_ = g.Wait()
	}
	return done
}

// unsupported says whether err is a server's answer that it has no such
// call: an answer the SDK cannot read as SQS's, as goaws gives for
// ChangeMessageVisibilityBatch.
func unsupported(err error) bool {
	var des *smithy.DeserializationError
	if errors.As(err, &des) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "InvalidAction" || api.ErrorCode() == "UnknownOperationException")
}

// Ready implements deadletter.Source: the messages SQS says are visible,
// and those received here and not yet handed on. SQS's count is
// approximate, so a capture that ends when the queue is empty may leave a
// message that arrived as it ended; the next capture takes it.
func (s *DLQSource) Ready() (int, error) {
	if s.ctx.Err() != nil {
		// Closed: what is left behind counts the messages it released.
		return readyAfterClose(s.client, s.queue)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	n, err := depth(ctx, s.client, s.queue, visibleMessages)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	n += s.handing
	s.mu.Unlock()
	return n, nil
}

func readyAfterClose(client *sqs.Client, queue Queue) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return depth(ctx, client, queue, visibleMessages, hiddenMessages)
}

// Close stops receiving and makes the messages it still holds visible
// again at once: Close comes after the ingest's last commit, so none of
// them is being stored, and the next consumer need not wait out their
// visibility. Closing again does nothing.
func (s *DLQSource) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.done.Wait()
		s.mu.Lock()
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, 0, len(s.held))
		for t, h := range s.held {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.FormatUint(t, 10)),
				ReceiptHandle: aws.String(h.receipt), VisibilityTimeout: 0})
		}
		single := s.singleVisibility
		s.mu.Unlock()
		// A release that fails costs only the wait: SQS hands the
		// message out again once its visibility runs out.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.extend(ctx, entries, single)
	})
	return nil
}
