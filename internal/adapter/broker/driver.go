package broker

import (
	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
)

// Driver is RabbitMQ as the core reaches it (package driver): its queues
// are named plainly, its consumers and their handler versions are read
// from the management API.
var Driver driver.Driver = rabbitDriver{}

type rabbitDriver struct{}

func (rabbitDriver) Traits() driver.Traits {
	return driver.Traits{System: "rabbitmq", DefaultConnection: "rabbitmq", Evidence: driver.VersionedConsumers, Rates: true, Routes: true}
}

func (rabbitDriver) Words() driver.Words {
	return driver.Words{Title: "RabbitMQ", Server: "RabbitMQ", ServerLabel: "rabbitmq", Doc: "docs/operations.md",
		QueueForm: "QUEUE", Replay: "On RabbitMQ a letter goes back through the default exchange to the work queue it " +
			"failed in, so that no other queue bound to its original exchange (billing, an audit tap) gets another copy; " +
			"--via-exchange publishes through the original exchange and routing key instead, and `replay show` then lists " +
			"every queue that gets a copy. A letter without x-death names no queue it failed in: it needs --routing-key " +
			"QUEUE, or --to-exchange and --routing-key, or --via-exchange."}
}

func (rabbitDriver) Config() config.Rules { return ConfigRules }

func (rabbitDriver) Unreachable(err error) bool { return Unreachable(err) }
