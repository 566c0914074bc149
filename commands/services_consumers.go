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
	return systemConsumers{rabbitmq: f.management(), bullmq: bullmq.Consumers{Resolve: func(name string) (bullmq.Ref, error) {
		s, _ := f.jobStoreFor(deadletter.BullMQ)
		ref, err := f.jobRef(s, name)
		if err != nil {
			return bullmq.Ref{}, err
		}
		return ref.(bullmq.Ref), nil
	}}}
}

// systemConsumers reads the consumers of targets from the system that
// holds them: a request's targets are all of one system. BullMQ's are
// read from the Redis of the connection each target's name gives,
// through the configuration.
type systemConsumers struct {
	rabbitmq replay.Consumers
	bullmq   bullmq.Consumers
}

func (c systemConsumers) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	if len(targets) > 0 && targets[0].System == deadletter.BullMQ {
		return c.bullmq.TargetConsumers(ctx, targets)
	}
	return c.rabbitmq.TargetConsumers(ctx, targets)
}
