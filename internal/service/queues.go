package service

import (
	"context"

	"github.com/expiryctl/expiryctl/deadletter"
)

// LiveQueues reads what a queue system's queues hold now, from its live
// view.
type LiveQueues interface {
	// Topology returns the states of the work queue workQueue, its retry
	// queues ("<workQueue>.retry.<ms>") and its dead-letter queue
	// ("<workQueue>.dlq"). An unreachable or refusing live view is not
	// an error: the report's Unavailable says what is missing.
	Topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error)
}
