package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
)

// LiveQueues returns the reader of what the broker's queues hold now, from
// RabbitMQ's management API at ManagementURLs, for the vhost of the AMQP
// URL. It dials nothing until asked. Its error is always nil: a management
// URL that cannot be used, like an API that cannot be reached, shows in
// each report's Unavailable, so that a command still shows the rest.
// A job store's queue (river://…) is read from the store itself.
func (f *Factory) LiveQueues(context.Context) (service.LiveQueues, error) {
	return &systemQueues{rabbitmq: f.management(), env: f.jobStoreEnv(), jobRef: f.jobRef, cloud: f.brokerTopology}, nil
}

// systemQueues reads a work queue's topology from the system that holds it.
type systemQueues struct {
	rabbitmq *broker.ManagementNodes
	env      driver.Env
	jobRef   func(jobStore, string) (storeRef, error)
	// cloud reads a queue named by URL, name or ARN on the cloud queue
	// service, ok false for a name that is not of its form.
	cloud func(ctx context.Context, workQueue string) (deadletter.QueueReport, bool, error)
}

// Topology reads workQueue's live view from the system that holds it; a
// system that shows nobody consuming its queues says so in the report.
func (l *systemQueues) Topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error) {
	report, err := l.topology(ctx, workQueue)
	if driverOfQueue(workQueue).Traits().Evidence == driver.NoConsumers {
		report = report.ConsumersUnseen()
	}
	return report, err
}

func (l *systemQueues) topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error) {
	if s, ok := jobStoreNamed(workQueue); ok {
		ref, err := l.jobRef(s, workQueue)
		if err != nil {
			return deadletter.QueueReport{Unavailable: err.Error()}, nil
		}
		read, cancel := context.WithTimeout(ctx, jobStoreLookup)
		defer cancel()
		return s.Topology(read, ref, l.env)
	}
	if l.cloud != nil {
		if report, ok, err := l.cloud(ctx, workQueue); ok {
			return report, err
		}
	}
	return l.rabbitmq.Topology(ctx, workQueue)
}

var _ service.LiveQueues = (*broker.ManagementNodes)(nil)

// driverOfQueue is the driver of the system whose queue's name queue is,
// as letters carry it: a job store's, a driver.Broker's, else the default
// system's, which the registry always holds.
func driverOfQueue(queue string) driver.Driver {
	if s, ok := jobStoreNamed(queue); ok {
		return s
	}
	d, _ := registry.Of(queueSystemOf(queue))
	return d
}
