package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	connconfig "github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
)

// maxAttempts is how often one call is tried. SQS throttles and its 5xx
// answers pass: the SDK's standard retryer backs off exponentially, with
// jitter, up to maxBackoff between tries.
const (
	maxAttempts = 8
	maxBackoff  = 20 * time.Second
	// responseTimeout bounds the wait for an answer to one attempt: longer
	// than SQS's longest long poll, so that a server that takes a request
	// and never answers fails the attempt, which the retryer tries again,
	// instead of holding the call for ever.
	responseTimeout = 30 * time.Second
)

// NewClient returns a client for ref's queue from the AWS configuration
// (environment, shared files, instance role): in the region its URL names,
// else the configured one, and at the endpoint its URL names when that is
// not Amazon's, else AWS_ENDPOINT_URL_SQS or AWS's own.
func NewClient(ctx context.Context, ref QueueRef) (*sqs.Client, error) {
	return newClient(ctx, ref)
}

// NewConnectionClient returns a client for ref's queue through the
// operator's connection c: in c's region (a queue that names another is
// refused before anything is sent), at c's endpoint unless ref's URL names
// one, with the credentials of c's profile of the AWS shared
// configuration; what c leaves out comes as NewClient's.
func NewConnectionClient(ctx context.Context, c connconfig.Connection, ref QueueRef) (*sqs.Client, error) {
	if c.Region != "" && ref.Region != "" && c.Region != ref.Region {
		return nil, fmt.Errorf("SQS queue %s is in region %s, and connection %q reaches region %s: nothing was sent; "+
			"name a connection of that region (docs/configuration.md)", ref.Name, ref.Region, c.Name, c.Region)
	}
	if c.Region != "" {
		ref.Region = c.Region
	}
	if ref.Endpoint == "" {
		ref.Endpoint = c.Endpoint
	}
	var opts []func(*config.LoadOptions) error
	if c.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.Profile))
	}
	return newClient(ctx, ref, opts...)
}

func newClient(ctx context.Context, ref QueueRef, opts ...func(*config.LoadOptions) error) (*sqs.Client, error) {
	if ref.Region != "" {
		opts = append(opts, config.WithRegion(ref.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("read the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if ref.Endpoint == "" {
			return nil, errors.New("no AWS region: set AWS_REGION, or name the queue by its URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
		}
		// An SQS-compatible server takes any region for its signature.
		cfg.Region = "us-east-1"
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.HTTPClient = HTTPClient()
		if ref.Endpoint != "" {
			o.BaseEndpoint = aws.String(ref.Endpoint)
		}
		o.Retryer = retry.NewStandard(func(r *retry.StandardOptions) {
			r.MaxAttempts = maxAttempts
			r.MaxBackoff = maxBackoff
			// The SDK's client-wide retry quota stops all retrying once a
			// run of errors spent it: a capture through an SQS that fails
			// a third of its calls then gave up on a delete it would have
			// got on its next try. Each call's attempts and backoff bound
			// the retrying instead, and a followed capture that still
			// fails waits out the outage as a whole.
			r.RateLimiter = ratelimit.None
		})
	}), nil
}

// Queue is an SQS queue found on its server.
type Queue struct {
	URL  string
	Name string
	// ARN names the queue in letters and the audit trail: unlike its
	// URL, it says the region and account whatever the endpoint.
	ARN string
	// FIFO is a .fifo queue: messages carry a group and are deduplicated.
	FIFO bool
	// Visibility is the queue's visibility timeout.
	Visibility time.Duration
	// RedriveSource is, when exactly one queue redrives to this one, that
	// queue's ARN.
	RedriveSource string
}

// FindQueue asks SQS for ref's queue and its attributes.
func FindQueue(ctx context.Context, client *sqs.Client, ref QueueRef) (Queue, error) {
	url, err := queueURL(ctx, client, ref)
	if err != nil {
		return Queue{}, err
	}
	q := Queue{URL: url, Name: ref.Name}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return Queue{}, queueError(ref.Name, client.Options().Region, err)
	}
	q.ARN = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if q.ARN == "" {
		return Queue{}, fmt.Errorf("SQS queue %s: the server did not say its ARN", q.URL)
	}
	q.FIFO = out.Attributes[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.Name, ".fifo")
	q.Visibility = 30 * time.Second
	if s, ok := out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]; ok {
		if d, err := time.ParseDuration(s + "s"); err == nil && d > 0 {
			q.Visibility = d
		}
	}
	// Not every SQS-compatible server lists the sources; without them, a
	// letter that SQS's redrive moved names its origin only where SQS
	// says it (DeadLetterQueueSourceArn).
	if sources, err := client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(q.URL)}); err == nil && len(sources.QueueUrls) == 1 {
		if ref, err := ParseQueueRef(sources.QueueUrls[0]); err == nil {
			region, account, _, _ := arnParts(q.ARN)
			q.RedriveSource = ARN(region, account, ref.Name)
		}
	}
	return q, nil
}

// QueueNotFoundError is SQS's answer that a queue does not exist.
type QueueNotFoundError struct{ Name, Region string }

func (e *QueueNotFoundError) Error() string {
	return fmt.Sprintf("SQS queue %q does not exist in region %s: check --queue, and AWS_REGION or the queue URL's region", e.Name, e.Region)
}

// queueError says what went wrong finding a queue in terms of what to do.
func queueError(name, region string, err error) error {
	// The SDK says it has no credentials only in its message.
	if strings.Contains(err.Error(), "get credentials") || strings.Contains(err.Error(), "retrieve credentials") {
		return fmt.Errorf("no AWS credentials for SQS queue %q: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or run where an instance or task role is available (%w)", name, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
			return &QueueNotFoundError{Name: name, Region: region}
		case "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException":
			return fmt.Errorf("SQS refused the credentials for queue %q (%s): check AWS_PROFILE or AWS_ACCESS_KEY_ID and its secret", name, api.ErrorCode())
		}
	}
	return fmt.Errorf("SQS queue %q: %w", name, err)
}

// Unreachable says whether err is SQS not answering, or answering that it
// cannot serve now (a throttle or a 5xx after every retry), which a
// followed capture waits out, as opposed to an answer that refuses.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return true
	}
	if (retry.ThrottleErrorCode{Codes: retry.DefaultThrottleErrorCodes}).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded)
}

// Is makes the error deadletter.ErrQueueNotFound, which a command exits 3
// on, on every queue system alike.
func (e *QueueNotFoundError) Is(target error) bool { return target == deadletter.ErrQueueNotFound }
