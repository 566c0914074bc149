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
	return driver.Traits{System: "rabbitmq", DefaultConnection: "rabbitmq", Evidence: driver.VersionedConsumers}
}

func (rabbitDriver) Words() driver.Words {
	return driver.Words{Title: "RabbitMQ", Server: "RabbitMQ", ServerLabel: "rabbitmq", Doc: "docs/operations.md",
		QueueForm: "QUEUE"}
}

func (rabbitDriver) Config() config.Rules { return ConfigRules }
