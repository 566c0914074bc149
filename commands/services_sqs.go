package commands

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
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
	conn, err := f.SQSConnection()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqsLookup)
	defer cancel()
	client, err := sqsqueue.NewConnectionClient(ctx, conn, parsed)
	if err != nil {
		return nil, err
	}
	queue, err := sqsqueue.FindQueue(ctx, client, parsed)
	if err != nil {
		return nil, err
	}
	return sqsqueue.OpenDLQSource(client, queue, sqsqueue.SourceOptions{Prefetch: prefetch}), nil
}

// openSQS completes runner for a request whose letters came from SQS: it
// publishes through the SQS connection of the letters' name, reaching each
// target queue in the region its ARN names (which the connection's region,
// when it names one, must be), and captures the dead-letter queues of its
// cohort there. SQS shows no consumers and no traffic, so such a run is
// paced by its ceiling alone and starts only when its request says
// --same-handler-ok.
func (r *requestRunner) openSQS(_ context.Context, runner *replay.Runner, _ replay.Request) (*replay.Runner, func(), error) {
	conn, err := r.publishConnection(deadletter.SQS)
	if err != nil {
		return nil, nil, err
	}
	publisher := sqsqueue.NewRegionalPublisher(func(ctx context.Context, region string) (*sqs.Client, error) {
		lookup, cancel := context.WithTimeout(ctx, sqsLookup)
		defer cancel()
		return sqsqueue.NewConnectionClient(lookup, conn, sqsqueue.QueueRef{Name: "of the replay", Region: region})
	})
	runner.Broker, runner.Flow, runner.Consumers = publisher, nil, nil
	runner.OpenDLQ = r.openDLQ
	return runner, func() { _ = publisher.Close() }, nil
}

// topologyLookup bounds reading a cloud queue's live view: the client's
// own retries included, a summary waits no longer.
const topologyLookup = 30 * time.Second

// cloudTopology reads what the queue workQueue names (by name, URL or
// ARN) and its dead-letter queue hold now, through the context's
// connection; what cannot be reached shows in the report's Unavailable.
// ok is false for a name that is no such queue's.
func (f *Factory) cloudTopology(ctx context.Context, workQueue string) (report deadletter.QueueReport, ok bool, err error) {
	if !sqsqueue.IsQueueRef(workQueue) {
		return deadletter.QueueReport{}, false, nil
	}
	parsed, err := sqsqueue.ParseQueueRef(workQueue)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, true, nil
	}
	conn, err := f.publishConnection(queueSystemOf(workQueue))
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, true, nil
	}
	lookup, cancel := context.WithTimeout(ctx, topologyLookup)
	defer cancel()
	client, err := sqsqueue.NewConnectionClient(lookup, conn, parsed)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, true, nil
	}
	report, err = sqsqueue.Topology(lookup, client, parsed)
	if err != nil && report.Unavailable == "" {
		report.Unavailable = err.Error()
	}
	return report, true, nil
}
