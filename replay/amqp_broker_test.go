package replay_test

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/replay"
)

// The runner's tests publish through the RabbitMQ adapter, which imports
// replay; see export_test.go.
func init() {
	replay.UseAMQPBroker(func(conn *amqp.Connection) (replay.AMQPTestBroker, error) {
		b, err := broker.NewAMQPBroker(conn)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
	replay.UseDLQSource(func(conn *amqp.Connection, queue string) (deadletter.ClosableSource, error) {
		return broker.OpenDLQSource(conn, queue, 100)
	})
}
