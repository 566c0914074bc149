package worker

import (
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology names the RabbitMQ objects of the expiry pipeline. Every name is a
// field so that tests and the demo can run side by side with production
// names on one broker.
type Topology struct {
	// Exchange is the topic exchange producers publish jobs to
	// (default "reservations").
	Exchange string
	// RoutingKey is the key jobs are published with and the main queue is
	// bound by (default "reservation.expire").
	RoutingKey string
	// Queue is the main work queue (default "reservation-expiry"). Its
	// dead-letter exchange is DeadLetterExchange, so rejections, TTL
	// expiries and overflow land in DeadLetterQueue.
	Queue string
	// DeadLetterExchange receives dead letters from the broker and from the
	// worker (default "reservations.dlx"). It is a topic exchange and the
	// DLQ is bound with "#", so a dead letter keeps its original routing key
	// and further queues can later take a subset.
	DeadLetterExchange string
	// DeadLetterQueue is the queue expiryctl ingests from
	// (default "reservation-expiry.dlq").
	DeadLetterQueue string
	// RetryTiers are the TTLs of the retry queues, shortest first. A retry
	// waits in the shortest tier at least as long as its backoff delay, with
	// a per-message expiration equal to the delay. Tiers exist because
	// RabbitMQ only expires messages at the head of a queue: one queue for
	// all delays would hold a 1 s retry behind a 60 s one.
	RetryTiers []time.Duration
}

// DefaultRetryTiers are the retry queue TTLs of the production topology. The
// longest is DefaultBackoff's cap, so that no delay the policy asks for is
// cut short; the tiers between keep a short wait from queueing behind a
// long one for long (RabbitMQ expires only the head of a queue).
var DefaultRetryTiers = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute}

// NewTopology returns the production names, each preceded by prefix and a
// dot when prefix is not empty: NewTopology("") is the production topology,
// NewTopology("test.x1") names its queue "test.x1.reservation-expiry".
func NewTopology(prefix string) Topology {
	if prefix != "" {
		prefix += "."
	}
	return Topology{
		Exchange:           prefix + "reservations",
		RoutingKey:         "reservation.expire",
		Queue:              prefix + "reservation-expiry",
		DeadLetterExchange: prefix + "reservations.dlx",
		DeadLetterQueue:    prefix + "reservation-expiry.dlq",
		RetryTiers:         append([]time.Duration(nil), DefaultRetryTiers...),
	}
}

// RetryQueue is the name of the retry queue for tier ttl:
// "<Queue>.retry.<milliseconds>".
func (t Topology) RetryQueue(ttl time.Duration) string {
	return t.Queue + ".retry." + strconv.FormatInt(ttl.Milliseconds(), 10)
}

// Queues lists every queue of the topology: main, retry tiers, DLQ.
func (t Topology) Queues() []string {
	queues := []string{t.Queue}
	for _, ttl := range t.RetryTiers {
		queues = append(queues, t.RetryQueue(ttl))
	}
	return append(queues, t.DeadLetterQueue)
}

// Exchanges lists the exchanges the topology declares.
func (t Topology) Exchanges() []string {
	return []string{t.Exchange, t.DeadLetterExchange}
}

// tierFor picks the shortest tier that can hold delay, and clamps delay to
// the longest tier when none can: the per-message expiration must not exceed
// the queue TTL, or the queue TTL would silently shorten the wait anyway.
func (t Topology) tierFor(delay time.Duration) (time.Duration, time.Duration) {
	for _, ttl := range t.RetryTiers {
		if delay <= ttl {
			return ttl, delay
		}
	}
	longest := t.RetryTiers[len(t.RetryTiers)-1]
	return longest, longest
}

func (t Topology) validate() error {
	switch {
	case t.Exchange == "", t.RoutingKey == "", t.Queue == "", t.DeadLetterExchange == "", t.DeadLetterQueue == "":
		return fmt.Errorf("topology %+v: every name must be set (start from worker.NewTopology)", t)
	case len(t.RetryTiers) == 0:
		return fmt.Errorf("topology for queue %s has no retry tiers", t.Queue)
	}
	prev := time.Duration(0)
	for _, ttl := range t.RetryTiers {
		if ttl < time.Millisecond || ttl <= prev {
			return fmt.Errorf("topology for queue %s: retry tiers %v must be at least 1ms and increasing", t.Queue, t.RetryTiers)
		}
		prev = ttl
	}
	return nil
}

// DeclareTopology declares the exchanges, queues and bindings of t on ch. It
// is idempotent. A queue that already exists with other arguments makes
// RabbitMQ close ch with PRECONDITION_FAILED; the error says which queue.
//
// Retry queues dead-letter to the default exchange with the main queue's name
// as routing key, not to Exchange: a retry is meant for this worker's queue
// alone, and going through the topic exchange would also copy it into every
// other queue bound to the routing key (an audit tap, a second consumer
// group), once per retry.
func DeclareTopology(ch *amqp.Channel, t Topology) error {
	if err := t.validate(); err != nil {
		return err
	}
	for _, x := range []string{t.Exchange, t.DeadLetterExchange} {
		if err := ch.ExchangeDeclare(x, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", x, err)
		}
	}
	queues := []struct {
		name string
		args amqp.Table
	}{
		{t.Queue, amqp.Table{"x-dead-letter-exchange": t.DeadLetterExchange}},
		{t.DeadLetterQueue, nil},
	}
	for _, ttl := range t.RetryTiers {
		queues = append(queues, struct {
			name string
			args amqp.Table
		}{t.RetryQueue(ttl), amqp.Table{
			"x-message-ttl":             ttl.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": t.Queue,
		}})
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			return fmt.Errorf("declare queue %s: %w", q.name, err)
		}
	}
	if err := ch.QueueBind(t.Queue, t.RoutingKey, t.Exchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s to %s: %w", t.Queue, t.Exchange, err)
	}
	if err := ch.QueueBind(t.DeadLetterQueue, "#", t.DeadLetterExchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s to %s: %w", t.DeadLetterQueue, t.DeadLetterExchange, err)
	}
	return nil
}
