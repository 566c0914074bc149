package sqsqueue_test

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
)

func TestParseQueueRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want sqsqueue.QueueRef
		err  string
	}{
		{in: "sqs://reservation-expiry-dlq", want: sqsqueue.QueueRef{Name: "reservation-expiry-dlq"}},
		{in: "sqs://jobs.fifo", want: sqsqueue.QueueRef{Name: "jobs.fifo"}},
		{in: "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq", want: sqsqueue.QueueRef{Name: "dlq",
			URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq", Region: "eu-west-1"}},
		{in: "https://eu-west-1.queue.amazonaws.com/123456789012/dlq", want: sqsqueue.QueueRef{Name: "dlq",
			URL: "https://eu-west-1.queue.amazonaws.com/123456789012/dlq", Region: "eu-west-1"}},
		{in: "http://127.0.0.1:4100/100010001000/dlq", want: sqsqueue.QueueRef{Name: "dlq",
			URL: "http://127.0.0.1:4100/100010001000/dlq", Endpoint: "http://127.0.0.1:4100"}},
		{in: "arn:aws:sqs:us-east-1:100010001000:dlq", want: sqsqueue.QueueRef{Name: "dlq", Region: "us-east-1", Account: "100010001000"}},
		{in: "sqs://bad name", err: "a queue name is 1 to 80"},
		{in: "sqs://" + strings.Repeat("a", 81), err: "a queue name is 1 to 80"},
		{in: "sqs://jobs.dlq", err: "a queue name is 1 to 80"},
		{in: "https://sqs.eu-west-1.amazonaws.com/dlq", err: "want …/ACCOUNT/NAME"},
		{in: "https://key:hunter2@sqs.eu-west-1.amazonaws.com/1/dlq", err: "carries no credentials"},
		{in: "arn:aws:sqs:us-east-1:dlq", err: "want arn:aws:sqs:REGION:ACCOUNT:NAME"},
		{in: "ftp://host/1/dlq", err: "name an SQS queue as sqs://NAME"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := sqsqueue.ParseQueueRef(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseQueueRef(%q) = %+v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseQueueRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
	for _, s := range []string{"reservation-expiry.dlq", "amq.gen-1", ""} {
		if sqsqueue.IsQueueRef(s) {
			t.Errorf("IsQueueRef(%q): a RabbitMQ queue taken for SQS", s)
		}
	}
}
