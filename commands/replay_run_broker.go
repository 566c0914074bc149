package commands

import (
	"context"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/replay"
)

// runBrokers hands a replay run its brokers: the first on the connection
// the Factory dials, and after a loss one on the next node of the list.
// Which node comes next is the Factory's (AMQP dials from the node after
// the one whose connection closed), so that the run goes on to another
// node rather than back to the one that just went.
type runBrokers struct {
	dial func() (*amqp.Connection, error)

	mu      sync.Mutex
	conn    *amqp.Connection
	current *broker.AMQPBroker
}

// open dials and opens the first broker.
func (b *runBrokers) open() (*broker.AMQPBroker, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openLocked()
}

func (b *runBrokers) openLocked() (*broker.AMQPBroker, error) {
	conn, err := b.dial()
	if err != nil {
		return nil, err
	}
	next, err := broker.NewAMQPBroker(conn)
	if err != nil {
		// A node that takes the connection and refuses the channel is
		// no node to go on with: the next try dials another.
		_ = conn.Close()
		return nil, err
	}
	b.conn, b.current = conn, next
	return next, nil
}

// reconnect is replay.Runner's Reconnect: it lets the lost broker go,
// closing its connection if the loss left it open (a channel lost alone),
// and opens a broker on the next node.
func (b *runBrokers) reconnect(context.Context) (replay.Broker, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release()
	return b.openLocked()
}

// close releases the current broker's channels; the connection is the
// Factory's, closed with it.
func (b *runBrokers) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current != nil {
		_ = b.current.Close()
	}
}

func (b *runBrokers) release() {
	if b.current != nil {
		_ = b.current.Close()
		b.current = nil
	}
	if b.conn != nil {
		_ = b.conn.Close()
		b.conn = nil
	}
}
