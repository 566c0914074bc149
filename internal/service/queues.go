package service

import (
	"context"

	"github.com/expiryctl/expiryctl/deadletter"
)

// LiveQueues reads what the broker's queues hold now, from RabbitMQ's
// management API.
type LiveQueues interface {
	// Topology returns the states of the work queue workQueue, its retry
	// queues ("<workQueue>.retry.<ms>") and its dead-letter queue
	// ("<workQueue>.dlq"). An unreachable or refusing management API is not
	// an error: the report's Unavailable says what is missing.
	Topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error)
}
