package commands

import (
	"context"
	"time"

	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/service"
)

// sqsLookup bounds finding an SQS queue: reading the AWS configuration and
// asking for the queue's URL and attributes, retries included.
const sqsLookup = time.Minute

// sqsDLQSource receives the SQS queue ref names, holding up to prefetch
// messages not yet stored.
func (f *Factory) sqsDLQSource(ref string, prefetch int) (service.DLQSource, error) {
	parsed, err := sqsqueue.ParseQueueRef(ref)
	if err != nil {
		return nil, &FlagError{Err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqsLookup)
	defer cancel()
	client, err := sqsqueue.NewClient(ctx, parsed)
	if err != nil {
		return nil, err
	}
	queue, err := sqsqueue.FindQueue(ctx, client, parsed)
	if err != nil {
		return nil, err
	}
	return sqsqueue.OpenDLQSource(client, queue, sqsqueue.SourceOptions{Prefetch: prefetch}), nil
}
