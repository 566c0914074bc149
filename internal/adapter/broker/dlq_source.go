package broker

import (
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// DLQSource consumes one dead-letter queue for deadletter.Ingest. Several
// sources on the same queue, in one process or many, compete for messages
// and never see the same unacknowledged message twice.
type DLQSource struct {
	conn       *amqp.Connection
	ch         *amqp.Channel
	queue      string
	deliveries chan deadletter.Delivery
	done       chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// OpenDLQSource starts consuming queue on conn with the given prefetch. The
// queue must exist; a missing queue is reported without creating it.
func OpenDLQSource(conn *amqp.Connection, queue string, prefetch int) (*DLQSource, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
		if IsNotFound(err) {
			return nil, &QueueNotFoundError{Queue: queue}
		}
		return nil, fmt.Errorf("inspect queue %q: %w", queue, err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("set prefetch %d: %w", prefetch, err)
	}
	raw, err := ch.Consume(queue, dlqConsumerTag, false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("consume %q: %w", queue, err)
	}
	s := &DLQSource{conn: conn, ch: ch, queue: queue, deliveries: make(chan deadletter.Delivery, prefetch), done: make(chan struct{})}
	go func() {
		defer close(s.deliveries)
		for d := range raw {
			select {
			case s.deliveries <- deadletter.Delivery{Message: DeadLetterMessage(queue, &d), Tag: d.DeliveryTag}:
			case <-s.done:
				return
			}
		}
	}()
	return s, nil
}

// dlqConsumerTag names a DLQSource's consumer on its own channel, where
// it is the only one, so that StopDeliveries can cancel it.
const dlqConsumerTag = "expiryctl-dlq"

// StopDeliveries implements deadletter.DeliveryStopper with a basic.cancel
// on the consuming channel. The broker sends cancel-ok after every
// delivery it sent before, on the same channel, and amqp091 hands the
// consumer's buffered deliveries on before closing it: once this returns,
// every letter the broker sent is in Deliveries or on its way there, and
// Deliveries closes after the last. The channel stays open for the acks.
func (s *DLQSource) StopDeliveries() error {
	return s.silentOr(s.ch.Cancel(dlqConsumerTag, false))
}

// Err says why the deliveries ended when the connection did: the broker
// stopped answering, closed it, or it broke; nil otherwise (deadletter.Ingest
// then says the consumer was closed).
func (s *DLQSource) Err() error { return Broken(s.conn) }

// QueueName is the queue's name, as letters and the audit trail name it.
func (s *DLQSource) QueueName() string { return s.queue }

// Deliveries implements deadletter.Source.
func (s *DLQSource) Deliveries() <-chan deadletter.Delivery { return s.deliveries }

// Acknowledge implements deadletter.Source with one multiple-ack.
func (s *DLQSource) Acknowledge(tag uint64) error { return s.silentOr(s.ch.Ack(tag, true)) }

// silentOr is err, or why the connection ended under it when it did (a
// silence, the broker's close, a broken socket): amqp091 passes on only
// "channel/connection is not open".
func (s *DLQSource) silentOr(err error) error { return withBroken(s.conn, err) }

// Ready implements deadletter.Source with a passive declare on a channel of
// its own, so that a failed inspection cannot close the consuming channel.
func (s *DLQSource) Ready() (int, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return 0, s.silentOr(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(s.queue, true, false, false, false, nil)
	if err != nil {
		return 0, s.silentOr(err)
	}
	return q.Messages, nil
}

// Close stops consuming. Deliveries not yet acknowledged return to the
// queue. Closing again does nothing.
func (s *DLQSource) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.closeErr = s.ch.Close()
	})
	return s.closeErr
}

// QueueNotFoundError is a queue the broker does not hold: a capture of it
// is refused rather than the queue created (exit 3, as on every system).
type QueueNotFoundError struct{ Queue string }

func (e *QueueNotFoundError) Error() string {
	return fmt.Sprintf("queue %q does not exist on this broker: check --queue (the DLQ is usually \"<queue>.dlq\")", e.Queue)
}

// Is makes it deadletter.ErrQueueNotFound.
func (e *QueueNotFoundError) Is(target error) bool { return target == deadletter.ErrQueueNotFound }
