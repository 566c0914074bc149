package sqsqueue

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/replay"
)

// Driver is Amazon SQS as the core reaches it (package driver): letters
// name their queue by ARN, and SQS shows nobody consuming a queue.
var Driver driver.Broker = sqsDriver{}

type sqsDriver struct{}

func (sqsDriver) Traits() driver.Traits {
	return driver.Traits{System: "sqs", QueuePrefix: "arn:aws:sqs:", DefaultConnection: "sqs", Evidence: driver.NoConsumers}
}

func (sqsDriver) Words() driver.Words {
	return driver.Words{Title: "SQS", Server: "SQS", ServerLabel: "sqs", Doc: "docs/sqs.md",
		QueueForm: "arn:aws:sqs:REGION:ACCOUNT:NAME", ConsumersUnseen: "SQS shows no consumers of a queue, nor their versions",
		Replay: "An SQS letter goes back to the queue it came from: the x-original-queue its worker wrote (an ARN, " +
			"a URL or a name), else the source queue SQS's redrive names. A letter that names neither needs " +
			"--routing-key with the queue's ARN.",
		NoOrigin: "SQS named no source queue; a replay request must name one (--routing-key arn:aws:sqs:REGION:ACCOUNT:NAME)",
		Implicit: "the AWS configuration (AWS_REGION, AWS_ENDPOINT_URL_SQS, AWS_PROFILE, …)"}
}

func (sqsDriver) Config() config.Rules { return ConfigRules }

func (sqsDriver) Unreachable(err error) bool { return Unreachable(err) }

func (sqsDriver) IsRef(s string) bool { return IsQueueRef(s) }

func (sqsDriver) CheckRef(s string) error {
	_, err := ParseQueueRef(s)
	return err
}

// FromEnvironment is the connection AWS_REGION, AWS_ENDPOINT_URL_SQS and
// AWS_PROFILE name, when the first or second is set.
func (d sqsDriver) FromEnvironment(getenv func(string) string) (config.Connection, bool) {
	region, endpoint := getenv("AWS_REGION"), getenv("AWS_ENDPOINT_URL_SQS")
	if region == "" && endpoint == "" {
		return config.Connection{}, false
	}
	return config.Connection{Name: d.Traits().DefaultConnection, System: ConfigRules.System, Region: region, Endpoint: endpoint,
		Profile: getenv("AWS_PROFILE")}, true
}

// Lookup bounds finding a queue: reading the AWS configuration and asking
// for the queue's URL and attributes, the client's own retries included.
const Lookup = time.Minute

// OpenSource receives the queue s names (sqs://NAME, a URL or an ARN)
// through c.
func (sqsDriver) OpenSource(ctx context.Context, c config.Connection, s string, prefetch int) (driver.Source, error) {
	ref, err := ParseQueueRef(s)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Lookup)
	defer cancel()
	client, err := NewConnectionClient(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	queue, err := FindQueue(ctx, client, ref)
	if err != nil {
		return nil, err
	}
	return OpenDLQSource(client, queue, SourceOptions{Prefetch: prefetch}), nil
}

// OpenPublisher sends through c to each target queue in the region its
// ARN names (which c's region, when it names one, must be).
func (sqsDriver) OpenPublisher(c config.Connection) (replay.Broker, error) {
	return NewRegionalPublisher(func(ctx context.Context, region string) (*sqs.Client, error) {
		lookup, cancel := context.WithTimeout(ctx, Lookup)
		defer cancel()
		return NewConnectionClient(lookup, c, QueueRef{Name: "of the replay", Region: region})
	}), nil
}

// topologyLookup bounds reading a queue's live view: the client's own
// retries included, a summary waits no longer.
const topologyLookup = 30 * time.Second

// Topology reads what the queue s names and its dead-letter queue hold
// now through c; what cannot be reached shows in the report's
// Unavailable.
func (sqsDriver) Topology(ctx context.Context, c config.Connection, s string) (deadletter.QueueReport, error) {
	ref, err := ParseQueueRef(s)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, topologyLookup)
	defer cancel()
	client, err := NewConnectionClient(ctx, c, ref)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	report, err := Topology(ctx, client, ref)
	if err != nil && report.Unavailable == "" {
		report.Unavailable = err.Error()
	}
	return report, nil
}
