package sqsqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// send puts n messages on the queue at url.
func send(t *testing.T, client *sqs.Client, url string, n int) {
	t.Helper()
	for range n {
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"reservation_id":"r-1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// topology reads the topology of ref, failing t on an error.
func topology(t *testing.T, client *sqs.Client, ref string) deadletter.QueueReport {
	t.Helper()
	parsed, err := sqsqueue.ParseQueueRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	report, err := sqsqueue.Topology(context.Background(), client, parsed)
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology(%s): %+v, %v", ref, report, err)
	}
	return report
}

// TestTopologyReadsTheQueueAndItsDeadLetterQueue: the work queue's
// messages are ready, its dead-letter queue's (found through its redrive
// policy) isolated, each queue named by its ARN, whether the queue is
// named by URL or by name; SQS shows no consumers and no head age.
func TestTopologyReadsTheQueueAndItsDeadLetterQueue(t *testing.T) {
	t.Parallel()
	client := sqstest.Client(t)
	work, dlq := sqstest.CreateWithDLQ(t, client, 5, 30)
	send(t, client, work.URL, 3)
	send(t, client, dlq.URL, 2)

	for _, ref := range []string{work.URL, "sqs://" + work.Name} {
		report := topology(t, client, ref)
		s := report.States()
		if s.Ready != 3 || s.InFlight != 0 || s.Scheduled != 0 || s.Isolated != 2 {
			t.Errorf("%s: states %+v; want 3 ready, 2 isolated", ref, s)
		}
		if s.Consumers != 0 || s.ReadyHeadAge != nil || s.IsolatedHeadAge != nil {
			t.Errorf("%s: consumers %d, head ages %v, %v: SQS shows none of them", ref, s.Consumers, s.ReadyHeadAge, s.IsolatedHeadAge)
		}
		names := map[deadletter.QueueRole]string{}
		for _, q := range report.Queues {
			names[q.Role] = q.Name
		}
		if names[deadletter.RoleWork] != work.ARN || names[deadletter.RoleDeadLetter] != dlq.ARN || names[deadletter.RoleRetry] != work.ARN+" (delayed)" {
			t.Errorf("%s: queues %v; want the work queue %s and the dead-letter queue %s by their ARNs", ref, names, work.ARN, dlq.ARN)
		}
	}

	// A message received and neither deleted nor visible again is in
	// flight. (goaws still counts it visible too, where SQS does not:
	// the ready count is not asserted.)
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(work.URL), MaxNumberOfMessages: 1})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v", err)
	}
	if s := topology(t, client, work.URL).States(); s.InFlight != 1 || s.Isolated != 2 {
		t.Errorf("after a receive: states %+v; want 1 in flight, 2 isolated", s)
	}
}

// TestTopologyOfAQueueWithoutADeadLetterQueue: no redrive policy, or one
// whose target was deleted, leaves the dead-letter line out; the work
// queue's states stand.
func TestTopologyOfAQueueWithoutADeadLetterQueue(t *testing.T) {
	t.Parallel()
	client := sqstest.Client(t)
	url, arn := sqstest.CreateQueue(t, client, sqstest.Name(t, "-plain"), nil)
	send(t, client, url, 4)
	report := topology(t, client, url)
	if len(report.Queues) != 2 || report.States().Ready != 4 || report.Queues[0].Name != arn {
		t.Errorf("a queue with no redrive policy: %+v; want its own lines alone, 4 ready", report)
	}

	work, dlq := sqstest.CreateWithDLQ(t, client, 5, 30)
	send(t, client, work.URL, 1)
	if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(dlq.URL)}); err != nil {
		t.Fatal(err)
	}
	report = topology(t, client, work.URL)
	for _, q := range report.Queues {
		if q.Role == deadletter.RoleDeadLetter {
			t.Errorf("a deleted dead-letter queue is shown: %+v", q)
		}
	}
	if report.States().Ready != 1 {
		t.Errorf("states %+v; want the work queue's 1 ready", report.States())
	}
}

// TestTopologyOfAQueueThatDoesNotExist: a *QueueNotFoundError, whose text
// the report's Unavailable carries.
func TestTopologyOfAQueueThatDoesNotExist(t *testing.T) {
	t.Parallel()
	client := sqstest.Client(t)
	ref, err := sqsqueue.ParseQueueRef("sqs://" + sqstest.Name(t, "-never-made"))
	if err != nil {
		t.Fatal(err)
	}
	report, err := sqsqueue.Topology(context.Background(), client, ref)
	var missing *sqsqueue.QueueNotFoundError
	if !errors.As(err, &missing) || missing.Name != ref.Name {
		t.Fatalf("Topology of a queue never made: %v; want a *QueueNotFoundError naming %s", err, ref.Name)
	}
	if report.Unavailable != err.Error() || !strings.Contains(report.Unavailable, "does not exist") || len(report.Queues) != 0 {
		t.Errorf("report %+v; want no queues and Unavailable saying the queue does not exist", report)
	}
}

// TestTopologyOfAnSQSThatDoesNotAnswer: not an error; Unavailable says
// what failed.
func TestTopologyOfAnSQSThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	client := sqs.New(sqs.Options{Region: sqstest.Region, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: credentials.NewStaticCredentialsProvider("sqstest", "sqstest", ""), RetryMaxAttempts: 1})
	ref, _ := sqsqueue.ParseQueueRef("sqs://expiry")
	report, err := sqsqueue.Topology(context.Background(), client, ref)
	if err != nil || report.Unavailable == "" || !strings.Contains(report.Unavailable, `"expiry"`) {
		t.Errorf("Topology with nothing answering: %+v, %v; want Unavailable naming the queue, and no error", report, err)
	}
}
