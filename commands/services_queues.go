package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/service"
)

// LiveQueues returns the reader of what the broker's queues hold now, from
// RabbitMQ's management API at ManagementURLs, for the vhost of the AMQP
// URL. It dials nothing until asked. Its error is always nil: a management
// URL that cannot be used, like an API that cannot be reached, shows in
// each report's Unavailable, so that a command still shows the rest.
func (f *Factory) LiveQueues(context.Context) (service.LiveQueues, error) {
	return f.management(), nil
}

var _ service.LiveQueues = (*broker.ManagementNodes)(nil)
