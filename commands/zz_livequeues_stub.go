package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/service"
)

// LiveQueues is a TEMPORARY stub, deleted at merge: commands/services_queues.go
// defines the real one, over RabbitMQ's management API.
func (f *Factory) LiveQueues(context.Context) (service.LiveQueues, error) {
	return notWiredQueues{}, nil
}

type notWiredQueues struct{}

func (notWiredQueues) Topology(context.Context, string) (broker.QueueReport, error) {
	return broker.QueueReport{Unavailable: "not wired"}, nil
}
