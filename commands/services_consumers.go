package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/replay"
)

// Consumers returns the reader of who consumes a replay's target queues,
// and which handler version each consumer's connection advertises, from
// RabbitMQ's management API at ManagementURLs (the reader LiveQueues
// returns), or, for BullMQ's queues, the workers connected to them on
// Redis, which advertise no version. It dials nothing until asked; an API
// that cannot be reached is the error of each read, which `replay run`
// refuses on unless the request said --same-handler-ok.
func (f *Factory) Consumers() replay.Consumers {
	return systemConsumers{rabbitmq: f.management()}
}

// systemConsumers reads the consumers of targets from the system that
// holds them: a request's targets are all of one system.
type systemConsumers struct{ rabbitmq replay.Consumers }

func (c systemConsumers) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	if len(targets) > 0 && targets[0].System == deadletter.BullMQ {
		return bullmq.Consumers{}.TargetConsumers(ctx, targets)
	}
	return c.rabbitmq.TargetConsumers(ctx, targets)
}
