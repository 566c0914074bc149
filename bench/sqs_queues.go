package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
)

// sqsRegion is the region the benchmark's client signs for: goaws serves
// any, and its ARNs name the one in its config, us-east-1 as
// scripts/services.sh writes it.
const sqsRegion = "us-east-1"

// sqsClient returns the client every SQS scenario uses, baselines and
// subjects alike, so that the two differ only in what the subject does
// with it. It is built as sqsqueue.NewClient builds the product's (the
// SDK's standard retryer, 8 tries, backoff up to 20 s, 30 s for an
// answer's headers, its HTTP client), with one difference: its credentials
// are static instead of the AWS configuration's: an SQS-compatible server
// takes any, and the benchmark must not pick up an engineer's real ones.
func sqsClient(ctx context.Context, endpoint string) (*sqs.Client, *sqsRetries, error) {
	retries := &sqsRetries{}
	client := sqs.New(sqs.Options{
		Region:       sqsRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("expiryctl-bench", "expiryctl-bench", ""),
		Retryer: countingRetryer{retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 8
			o.MaxBackoff = 20 * time.Second
			o.RateLimiter = ratelimit.None
		}), retries},
		HTTPClient: sqsqueue.HTTPClient(),
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)},
		func(o *sqs.Options) { o.RetryMaxAttempts = 1 }); err != nil {
		return nil, nil, fmt.Errorf("no SQS server answers at %s (%w): start goaws with scripts/services.sh or set -sqs-endpoint", endpoint, err)
	}
	return client, retries, nil
}

// sqsRetries counts the calls the SDK's retryer tried again, so that a
// phase can say whether a retry, and the wait or the duplicate it may
// cause, is in its figure.
type sqsRetries struct{ n atomic.Int64 }

func (r *sqsRetries) count() int64 { return r.n.Load() }

type countingRetryer struct {
	aws.RetryerV2
	retries *sqsRetries
}

func (r countingRetryer) IsErrorRetryable(err error) bool {
	ok := r.RetryerV2.IsErrorRetryable(err)
	if ok {
		r.retries.n.Add(1)
	}
	return ok
}

// sqsQueues are a scenario's SQS queues, by the name the scenario gave
// each.
type sqsQueues struct {
	client *sqs.Client
	byName map[string]sqsqueue.Queue
}

// createSQSQueues creates a queue of the run's own for each of names
// (expiryctl-bench-RANDOM-NAME) with the server's default attributes, and
// finds each as the product does (sqsqueue.FindQueue). delete undoes it,
// also after an error.
func createSQSQueues(ctx context.Context, client *sqs.Client, names ...string) (sqsQueues, error) {
	q := sqsQueues{client: client, byName: map[string]sqsqueue.Queue{}}
	prefix := "expiryctl-bench-" + runID + "-" + randomSuffix()[:4]
	for _, name := range names {
		full := prefix + "-" + name
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(full)})
		if err != nil {
			return q, fmt.Errorf("create SQS queue %s: %w", full, err)
		}
		queueURL := aws.ToString(out.QueueUrl)
		q.byName[name] = sqsqueue.Queue{URL: queueURL, Name: full}
		found, err := sqsqueue.FindQueue(ctx, client, sqsqueue.QueueRef{Name: full, URL: queueURL})
		if err != nil {
			return q, err
		}
		q.byName[name] = found
	}
	return q, nil
}

// delete deletes the queues. It does not take the scenario's context: an
// interrupted run must still clean up the shared server.
func (q sqsQueues) delete(logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, queue := range q.byName {
		if _, err := q.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(queue.URL)}); err != nil {
			logf("warning: delete SQS queue %s: %v", queue.Name, err)
		}
	}
}

// depth is the queue's ApproximateNumberOfMessages and
// ApproximateNumberOfMessagesNotVisible. goaws counts in-flight messages
// in the first as well, so there 0 means every message was deleted.
func (q sqsQueues) depth(ctx context.Context, queue sqsqueue.Queue) (visible, hidden int, err error) {
	out, err := q.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, 0, fmt.Errorf("read the depth of SQS queue %s: %w", queue.Name, err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, hidden, nil
}

// expectDepth checks that queue holds exactly n messages, none in flight.
func (q sqsQueues) expectDepth(ctx context.Context, queue sqsqueue.Queue, n int) error {
	visible, hidden, err := q.depth(ctx, queue)
	if err != nil {
		return err
	}
	if visible != n || hidden != 0 {
		return fmt.Errorf("SQS queue %s holds %d messages (%d in flight), want %d", queue.Name, visible, hidden, n)
	}
	return nil
}

// sqsFillConcurrency is how many SendMessageBatch calls fill a queue at
// once (not timed).
const sqsFillConcurrency = 8

// fill sends msgs to queue with SendMessageBatch, ten to a call, and checks
// by the queue's count that all arrived: goaws v0.5.4 answers a batch with
// a key the SDK does not read, so the answer says 0 sent and 0 failed
// whatever happened. Not timed.
func (q sqsQueues) fill(ctx context.Context, queue sqsqueue.Queue, msgs []sqsMessage) error {
	before, _, err := q.depth(ctx, queue)
	if err != nil {
		return err
	}
	if err := sendBatches(ctx, q.client, queue, msgs, sqsFillConcurrency); err != nil {
		return err
	}
	// goaws queues a batch before it answers, so the count is final
	// once every call returned; a real SQS's count may lag a little.
	deadline := time.Now().Add(30 * time.Second)
	for {
		visible, hidden, err := q.depth(ctx, queue)
		if err != nil {
			return err
		}
		if visible+hidden == before+len(msgs) || time.Now().After(deadline) {
			if visible+hidden != before+len(msgs) {
				return fmt.Errorf("SQS queue %s holds %d messages after sending %d to %d, want %d", queue.Name, visible+hidden, len(msgs), before, before+len(msgs))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sendBatches sends msgs to queue with SendMessageBatch, ten to a call,
// with up to inFlight calls at once. An entry the answer lists as failed
// is an error; one it does not list at all is not, for goaws's sake (see
// fill).
func sendBatches(ctx context.Context, client *sqs.Client, queue sqsqueue.Queue, msgs []sqsMessage, inFlight int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(inFlight)
	for lo := 0; lo < len(msgs); lo += 10 {
		chunk := msgs[lo:min(lo+10, len(msgs))]
		g.Go(func() error {
			entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
			for i, m := range chunk {
				entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.body),
					MessageAttributes: m.attributes}
			}
			out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue.URL), Entries: entries})
			if err != nil {
				return fmt.Errorf("send to SQS queue %s: %w", queue.Name, err)
			}
			if len(out.Failed) > 0 {
				return fmt.Errorf("send to SQS queue %s: %d of %d entries failed: %s", queue.Name, len(out.Failed), len(chunk),
					aws.ToString(out.Failed[0].Message))
			}
			return nil
		})
	}
	return g.Wait()
}

// sqsMessage is one message as a worker sends it to an SQS dead-letter
// queue.
type sqsMessage struct {
	body       string
	attributes map[string]types.MessageAttributeValue
}

// sqsWorkerLetter is what a worker following the message contract sends to
// an SQS dead-letter queue for job n (docs/sqs.md): the body
// workerLetter(n) carries on RabbitMQ, and as message attributes the
// error class and text, the two-entry attempt history as JSON text, and
// the queue the job came from.
func sqsWorkerLetter(n int, originARN string) sqsMessage {
	m := workerLetter(n)
	rid := fmt.Sprintf("r-%07d", n)
	ec := errorClasses[n%len(errorClasses)]
	text := fmt.Sprintf(ec.text, rid)
	at := letterBase.Add(time.Duration(n) * 10 * time.Millisecond).Truncate(time.Second)
	history := fmt.Sprintf(`[{"at":%q,"error_class":%q,"error":%q},{"at":%q,"error_class":%q,"error":%q}]`,
		at.Add(-40*time.Second).Format(time.RFC3339), ec.class, text, at.Format(time.RFC3339), ec.class, text)
	str := func(dataType, v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String(dataType), StringValue: aws.String(v)}
	}
	return sqsMessage{body: string(m.Body), attributes: map[string]types.MessageAttributeValue{
		"x-error-class":     str("String", ec.class),
		"x-last-error":      str("String", text),
		"x-attempt-history": str("String.json", history),
		"x-original-queue":  str("String", originARN),
	}}
}

// sqsWorkerLetters is sqsWorkerLetter(first..first+n-1).
func sqsWorkerLetters(first, n int, originARN string) []sqsMessage {
	msgs := make([]sqsMessage, n)
	for i := range msgs {
		msgs[i] = sqsWorkerLetter(first+i, originARN)
	}
	return msgs
}

// sqsSiblingARN is the ARN of a queue named name on the same server,
// region and account as queue: the work queue a DLQ's letters came from.
func sqsSiblingARN(queue sqsqueue.Queue, name string) string {
	p := strings.Split(queue.ARN, ":")
	if len(p) != 6 {
		return queue.ARN
	}
	return sqsqueue.ARN(p[3], p[4], name)
}

// sqsServerPIDs finds the processes serving endpoint, for the CPU notes:
// the one listening on its port (by the socket's inode in /proc), or, when
// that cannot be read, every process named goaws. Nil when the server is
// not on this machine.
func sqsServerPIDs(endpoint string) []int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	if pid := listenerPID(port); pid > 0 {
		return []int{pid}
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _, _, ok := readProcStat(pid); ok && comm == "goaws" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// listenerPID is the process with a socket listening on TCP port, or 0.
func listenerPID(port int) int {
	inodes := map[string]bool{}
	hexPort := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(line)
			if len(fields) >= 10 && strings.HasSuffix(fields[1], hexPort) && fields[3] == "0A" {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir("/proc/" + e.Name() + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); err == nil && inodes[link] {
				return pid
			}
		}
	}
	return 0
}

// sqsServer holds the pids sqsServerPIDs found, for takeCPU to name
// "goaws"; set once by the first SQS scenario.
var sqsServer struct {
	once sync.Once
	pids map[int]bool
}

// watchSQSServer makes the CPU notes count the processes serving endpoint
// as "goaws", and says which it found.
func watchSQSServer(endpoint string) (string, error) {
	sqsServer.once.Do(func() {
		sqsServer.pids = map[int]bool{}
		for _, pid := range sqsServerPIDs(endpoint) {
			sqsServer.pids[pid] = true
		}
	})
	if len(sqsServer.pids) == 0 {
		return "", errors.New("no process on this machine serves " + endpoint + ": its CPU is not counted")
	}
	var pids []string
	for pid := range sqsServer.pids {
		pids = append(pids, strconv.Itoa(pid))
	}
	return strings.Join(pids, ", "), nil
}
