package replay

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// AMQPTestBroker is the RabbitMQ broker as replay's own tests use it.
type AMQPTestBroker interface {
	Broker
	Encoder
	User() string
}

// newAMQPBroker opens the RabbitMQ adapter's broker (internal/adapter/broker).
// That package imports this one, so these in-package tests cannot import
// it: amqp_broker_test.go, in package replay_test, sets this at init.
var newAMQPBroker func(conn *amqp.Connection) (AMQPTestBroker, error)

// UseAMQPBroker sets how replay's in-package tests open a broker.
func UseAMQPBroker(open func(conn *amqp.Connection) (AMQPTestBroker, error)) { newAMQPBroker = open }

// newDLQSource opens the RabbitMQ adapter's consumer on a dead-letter
// queue, for the tests of a run's own capture; set at init as
// newAMQPBroker is.
var newDLQSource func(conn *amqp.Connection, queue string) (deadletter.ClosableSource, error)

// UseDLQSource sets how replay's in-package tests open a DLQ consumer.
func UseDLQSource(open func(conn *amqp.Connection, queue string) (deadletter.ClosableSource, error)) {
	newDLQSource = open
}
