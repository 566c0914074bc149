package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// AMQPBroker is the replay runner's broker (replay.Broker) over RabbitMQ.
// It publishes on one confirm-mode channel of an amqp091 connection and
// inspects queues and exchanges on another, so that a failed inspection
// (a passive declare of a missing queue closes its channel) never touches
// the publishing channel.
//
// It is used by one goroutine at a time: returns are matched to messages in
// the order the broker sends them, which relies on Outcome being called by
// the goroutine that publishes.
type AMQPBroker struct {
	conn *amqp.Connection
	// node is the address the connection reached, kept from the start:
	// it names the node in a failover's messages once the node is gone.
	node string

	ch      *amqp.Channel
	returns chan amqp.Return
	// returned holds the items the broker returned whose confirm has not
	// been looked at yet.
	returned map[int64]amqp.Return

	mu        sync.Mutex
	inspectCh *amqp.Channel
}

// returnBuffer bounds the basic.returns buffered between two Outcome calls.
// The connection's reader blocks on a full buffer (for up to 5 s, then drops
// the return), so it is larger than any publish window the runner keeps.
const returnBuffer = 1 << 16

// NewAMQPBroker opens the publishing channel on conn in confirm mode.
func NewAMQPBroker(conn *amqp.Connection) (*AMQPBroker, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open a RabbitMQ channel for publishing: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	b := &AMQPBroker{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, returnBuffer)),
		returned: map[int64]amqp.Return{}}
	if addr := conn.RemoteAddr(); addr != nil {
		b.node = addr.String()
	}
	return b, nil
}

// Node implements replay.NodeNamer: the address of the node the broker
// publishes through (host:port, never a password).
func (b *AMQPBroker) Node() string { return b.node }

// User returns the RabbitMQ user the connection authenticated as, which
// is the only user_id RabbitMQ lets it publish; "" when its mechanism names
// none (EXTERNAL, a client certificate).
func (b *AMQPBroker) User() string {
	for _, a := range b.conn.Config.SASL {
		switch auth := a.(type) {
		case *amqp.PlainAuth:
			return auth.Username
		case *amqp.AMQPlainAuth:
			return auth.Username
		}
	}
	return ""
}

// Publish implements replay.Broker.
func (b *AMQPBroker) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	headers := amqp.Table(m.Headers)
	if headers == nil {
		headers = amqp.Table{}
	}
	// A message Encode did not build (a test's, a bench's) goes with
	// no properties but persistence.
	p, _ := m.Wire.(deadletter.Properties)
	dc, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.RoutingKey, true, false, amqp.Publishing{
		Headers:         headers,
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationID,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageID,
		Timestamp:       p.Time(),
		Type:            p.Type,
		UserId:          p.UserID,
		AppId:           p.AppID,
		Body:            m.Body,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, b.lost(err)
	}
	if dc == nil {
		return nil, errors.New("the publishing channel is not in confirm mode")
	}
	return &amqpPending{b: b, dc: dc, item: m.Item, exchange: m.Exchange, key: m.RoutingKey}, nil
}

type amqpPending struct {
	b             *AMQPBroker
	dc            *amqp.DeferredConfirmation
	item          int64
	exchange, key string
}

func (p *amqpPending) Done() <-chan struct{} { return p.dc.Done() }

func (p *amqpPending) Outcome() error {
	b := p.b
	// RabbitMQ sends a basic.return before the confirm of the same message,
	// and amqp091 hands both over from one reader goroutine in that order:
	// once the confirm is in, its return (if any) is already buffered.
	b.drainReturns()
	ret, returned := b.returned[p.item]
	delete(b.returned, p.item)
	acked := p.dc.Acked()
	switch {
	case !acked && b.ch.IsClosed():
		// amqp091 nacks whatever is in flight when the channel closes.
		return &replay.BrokerLostError{Err: b.closeReason()}
	case !acked:
		return &replay.PublishFailure{Exchange: p.exchange, RoutingKey: p.key, Reason: "the broker nacked the message"}
	case returned:
		return &replay.PublishFailure{Exchange: p.exchange, RoutingKey: p.key,
			Reason: fmt.Sprintf("returned unroutable: %d %s (no queue is bound for this routing key)", ret.ReplyCode, ret.ReplyText)}
	}
	return nil
}

func (b *AMQPBroker) drainReturns() {
	for {
		select {
		case ret, ok := <-b.returns:
			if !ok {
				return
			}
			if id, ok := itemOf(ret.Headers); ok {
				b.returned[id] = ret
			}
		default:
			return
		}
	}
}

// lost is the broker lost under err, saying why the connection ended when
// that is known: amqp091 passes on only "channel/connection is not open".
func (b *AMQPBroker) lost(err error) error {
	return &replay.BrokerLostError{Err: withBroken(b.conn, err)}
}

func (b *AMQPBroker) closeReason() error {
	if err := Broken(b.conn); err != nil {
		return err
	}
	if b.conn.IsClosed() {
		return errors.New("the connection to RabbitMQ closed")
	}
	return errors.New("the RabbitMQ publishing channel closed")
}

// itemOf reads x-replay-item back from a returned message's headers.
func itemOf(h amqp.Table) (int64, bool) {
	switch v := h[replay.HeaderReplayItem].(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// inspect runs fn on the inspection channel, reopening it when an earlier
// passive declare closed it. An error on a connection that closed meanwhile
// is the broker lost, which a run may fail over from, not a refusal.
func (b *AMQPBroker) inspect(fn func(ch *amqp.Channel) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inspectCh == nil || b.inspectCh.IsClosed() {
		ch, err := b.conn.Channel()
		if err != nil {
			return b.lost(err)
		}
		b.inspectCh = ch
	}
	err := fn(b.inspectCh)
	if err != nil && (b.conn.IsClosed() || errors.Is(err, amqp.ErrClosed)) {
		return b.lost(err)
	}
	return err
}

// RouteExists implements replay.Routes: whether exchange exists, by a
// passive declare.
func (b *AMQPBroker) RouteExists(_ context.Context, exchange string) (bool, error) {
	if exchange == "" || exchange == "amq.default" {
		return true, nil
	}
	var exists bool
	err := b.inspect(func(ch *amqp.Channel) error {
		err := ch.ExchangeDeclarePassive(exchange, amqp.ExchangeTopic, true, false, false, false, nil)
		var amqpErr *amqp.Error
		switch {
		case err == nil:
			exists = true
			return nil
		case errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound:
			return nil
		case errors.As(err, &amqpErr) && amqpErr.Code == amqp.PreconditionFailed:
			// A passive declare checks existence only; some brokers still
			// compare the type. Existing under another type is existing.
			exists = true
			return nil
		}
		return err
	})
	return exists, err
}

// QueueDepth implements replay.Broker with a passive declare.
func (b *AMQPBroker) QueueDepth(_ context.Context, queue string) (int, bool, error) {
	var depth int
	var exists bool
	err := b.inspect(func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		var amqpErr *amqp.Error
		switch {
		case err == nil:
			depth, exists = q.Messages, true
			return nil
		case errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound:
			return nil
		}
		return err
	})
	return depth, exists, err
}

// Close implements replay.Broker.
func (b *AMQPBroker) Close() error {
	b.mu.Lock()
	if b.inspectCh != nil {
		_ = b.inspectCh.Close()
	}
	b.mu.Unlock()
	if err := b.ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return err
	}
	return nil
}
