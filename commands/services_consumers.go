package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/replay"
)

// Consumers returns the reader of who consumes a replay's target queues,
// and which handler version each consumer's connection advertises, from
// RabbitMQ's management API at ManagementURLs (the reader LiveQueues
// returns), or from a job store's driver where its workers can be read.
// It dials nothing until asked; an API that cannot be reached is the
// error of each read, which `replay run` refuses on unless the request
// said --same-handler-ok.
func (f *Factory) Consumers() replay.Consumers {
	return systemConsumers{rabbitmq: f.management(), resolve: f.jobRef}
}

// systemConsumers reads the consumers of targets from the system that
// holds them: a request's targets are all of one system. A job store's
// are read through its driver, from the connection each target's name
// gives through the configuration; a system that shows nobody consuming
// a queue says why.
type systemConsumers struct {
	rabbitmq replay.Consumers
	resolve  func(jobStore, string) (storeRef, error)
}

func (c systemConsumers) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	if len(targets) == 0 {
		return c.rabbitmq.TargetConsumers(ctx, targets)
	}
	d, ok := registry.Of(targets[0].System.OrDefault())
	if !ok {
		return nil, fmt.Errorf("no driver reads the consumers of %s", targets[0].System)
	}
	if d.Traits().Evidence == driver.NoConsumers {
		return nil, errors.New(d.Words().ConsumersUnseen)
	}
	s, ok := d.(jobStore)
	if !ok {
		return c.rabbitmq.TargetConsumers(ctx, targets)
	}
	consumers := s.Consumers(func(name string) (storeRef, error) { return c.resolve(s, name) })
	if consumers == nil {
		return nil, fmt.Errorf("%s shows no workers of a queue", d.Words().Title)
	}
	return consumers.TargetConsumers(ctx, targets)
}
