package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

// SQSDeps is what RunSQS works with.
type SQSDeps struct {
	// Client reaches SQS or an SQS-compatible server.
	Client *sqs.Client
	// Prefix starts the queues' names: PREFIX-reservation-expiry and its
	// -dlq (SQS allows no dots in a name).
	Prefix string
	// RunID is in every reservation id of the run.
	RunID string
	// Pool holds the reservations schema: the jobs' reservations are
	// seeded there, held and past their deadline, for a worker to expire
	// once they are replayed.
	Pool *pgxpool.Pool
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// SQSResult is what RunSQS staged.
type SQSResult struct {
	// WorkQueue and DeadLetterQueue are the queues' URLs; WorkARN the
	// work queue's ARN, which a replay request names.
	WorkQueue, DeadLetterQueue, WorkARN string
	// Redriven letters were moved to the DLQ by SQS's redrive policy;
	// WorkerSent were sent there by a worker, with why.
	Redriven, WorkerSent int
}

// sqsFailure is one job a worker on SQS dead-letters itself.
type sqsFailure struct {
	class, err string
}

// sqsFailures are the worker's dead letters: a database outage that spent
// the retry budget, a version that moved on, a job that was never valid.
var sqsFailures = []sqsFailure{
	{"db_timeout", "pq: canceling statement due to statement timeout"},
	{"db_timeout", "pq: canceling statement due to statement timeout"},
	{"db_timeout", "dial tcp 10.0.3.7:5432: connect: connection refused"},
	{"db_timeout", "dial tcp 10.0.3.7:5432: connect: connection refused"},
	{"version_conflict", "reservation version is 5, the job expects 4"},
	{"validation", "hold_until is missing"},
}

// sqsRedriven is how many jobs no worker managed to take before SQS's
// redrive moved them.
const sqsRedriven = 3

// RunSQS stages an incident on SQS beside the RabbitMQ one: a work queue
// whose redrive policy sends a job to its DLQ after one receive, jobs that
// a worker received and never deleted (SQS moves them), and jobs a worker
// dead-lettered itself with the contract's attributes. It returns once
// they all wait in the DLQ. The queues are the run's prefix's, made when
// missing; the jobs' ids are the run's own.
func RunSQS(ctx context.Context, deps SQSDeps) (SQSResult, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	out := &progress{w: deps.Out}
	if out.w == nil {
		out.w = io.Discard
	}
	c := deps.Client
	name := "reservation-expiry"
	if deps.Prefix != "" {
		name = deps.Prefix + "-" + name
	}
	dlq, dlqARN, err := sqsQueue(ctx, c, name+"-dlq", nil)
	if err != nil {
		return SQSResult{}, err
	}
	redrive := fmt.Sprintf(`{"maxReceiveCount":"1","deadLetterTargetArn":%q}`, dlqARN)
	work, workARN, err := sqsQueue(ctx, c, name, map[string]string{"RedrivePolicy": redrive, "VisibilityTimeout": "1"})
	if err != nil {
		return SQSResult{}, err
	}
	res := SQSResult{WorkQueue: work, DeadLetterQueue: dlq, WorkARN: workARN}
	// An earlier demo's replayed jobs wait there for a worker the demo
	// does not run: they would be taken for this run's and redriven.
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(work)}); err != nil {
		return res, fmt.Errorf("demo: purge SQS queue %s: %w", name, err)
	}
	before, err := sqsVisible(ctx, c, dlq)
	if err != nil {
		return res, err
	}

	var seeds []seed
	for i := range sqsRedriven {
		seeds = append(seeds, seed{id: sqsReservation(deps.RunID, "redrive", i), status: "held", version: 4, holdUntil: time.Now().Add(-time.Minute), units: 1})
	}
	for i := range sqsFailures {
		seeds = append(seeds, seed{id: sqsReservation(deps.RunID, "worker", i), status: "held", version: 4, holdUntil: time.Now().Add(-time.Minute), units: 1})
	}
	if deps.Pool != nil {
		if err := worker.EnsureSchema(ctx, deps.Pool); err != nil {
			return res, err
		}
		if err := seedReservations(ctx, deps.Pool, seeds); err != nil {
			return res, err
		}
	}
	for i := range sqsRedriven {
		job := sqsJob(deps.RunID, "redrive", i)
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(work), MessageBody: aws.String(job),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"content-type":    {DataType: aws.String("String"), StringValue: aws.String("application/json")},
				"x-enqueued-at":   {DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(time.Now().Unix(), 10))},
				"x-tenant-region": {DataType: aws.String("String.region"), StringValue: aws.String("eu-west-1")},
			}}); err != nil {
			return res, fmt.Errorf("demo: send to SQS queue %s: %w", name, err)
		}
	}
	// A worker that takes the jobs and dies before deleting them: once
	// their visibility runs out, SQS's redrive moves them to the DLQ.
	received := 0
	for received < sqsRedriven {
		got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			return res, fmt.Errorf("demo: receive from SQS queue %s: %w", name, err)
		}
		received += len(got.Messages)
	}
	res.Redriven = sqsRedriven

	for i, f := range sqsFailures {
		history, _ := json.Marshal([]map[string]string{
			{"at": time.Now().Add(-2 * time.Second).UTC().Format(time.RFC3339), "error_class": f.class, "error": f.err},
			{"at": time.Now().UTC().Format(time.RFC3339), "error_class": f.class, "error": f.err},
		})
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(sqsJob(deps.RunID, "worker", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"x-error-class":     {DataType: aws.String("String"), StringValue: aws.String(f.class)},
				"x-last-error":      {DataType: aws.String("String"), StringValue: aws.String(f.err)},
				"x-attempt-history": {DataType: aws.String("String.json"), StringValue: aws.String(string(history))},
				"x-original-queue":  {DataType: aws.String("String"), StringValue: aws.String(workARN)},
				"x-handler-version": {DataType: aws.String("String"), StringValue: aws.String("expiry-worker@1.4.2")},
			}}); err != nil {
			return res, fmt.Errorf("demo: send to SQS queue %s-dlq: %w", name, err)
		}
	}
	res.WorkerSent = len(sqsFailures)
	out.printf("staged on SQS: %d jobs a worker dead-lettered with why, %d that SQS's redrive moved (%s)", res.WorkerSent, res.Redriven, name)
	for {
		n, err := sqsVisible(ctx, c, dlq)
		if err != nil {
			return res, err
		}
		if n >= before+res.Redriven+res.WorkerSent {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, errors.New("demo: SQS's redrive did not move the jobs to the DLQ in time")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sqsJob is a contract job for the run, its ids saying where it went.
func sqsJob(runID, kind string, i int) string {
	id := sqsReservation(runID, kind, i)
	return fmt.Sprintf(`{"reservation_id":%q,"expected_version":4,"hold_until":%q,"idempotency_key":"expire:%s:v4"}`,
		id, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), id)
}

// sqsReservation is the reservation id of job i of kind.
func sqsReservation(runID, kind string, i int) string {
	return fmt.Sprintf("r-%s-sqs-%s-%d", runID, kind, i)
}

// sqsQueue makes the queue name with attrs (SQS answers with the queue
// that exists when its attributes match) and returns its URL and ARN.
func sqsQueue(ctx context.Context, c *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	made, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("demo: create SQS queue %s: %w", name, err)
	}
	got, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: made.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("demo: read SQS queue %s: %w", name, err)
	}
	return aws.ToString(made.QueueUrl), got.Attributes[string(types.QueueAttributeNameQueueArn)], nil
}

// sqsVisible is what SQS counts in queue.
func sqsVisible(ctx context.Context, c *sqs.Client, queue string) (int, error) {
	got, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return 0, fmt.Errorf("demo: read SQS queue depth: %w", err)
	}
	n, _ := strconv.Atoi(got.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	return n, nil
}
