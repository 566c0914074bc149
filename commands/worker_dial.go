package commands

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// DialAMQP opens a RabbitMQ connection of its own, not shared with the
// other commands' (Factory.AMQP), whose connection properties are
// properties: the reference worker advertises its handler version in them.
// The first node of AMQPURLs that accepts is used. The caller closes it.
func (f *Factory) DialAMQP(properties amqp.Table) (*amqp.Connection, error) {
	opts, err := f.dialOptions(properties)
	if err != nil {
		return nil, err
	}
	conn, _, err := broker.DialAny(f.AMQPURLs(), 0, opts)
	return conn, err
}
