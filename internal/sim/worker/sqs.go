package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SQSDeps is what RunSQS works with.
type SQSDeps struct {
	Pool   *pgxpool.Pool
	Client *sqs.Client
	// QueueURL is the work queue.
	QueueURL string
	// Out receives a line per job; nil discards them.
	Out io.Writer
}

// RunSQS is the reference worker on an SQS work queue, until ctx ends: it
// expires each job's reservation exactly once (ExpireOnce) and deletes the
// message only after that committed. A job that fails is left alone: SQS
// hands it out again once its visibility runs out, and the queue's redrive
// policy moves it to the DLQ after its maxReceiveCount. It is the demo's
// consumer of replayed SQS jobs, not a worker of the whole contract: it
// sends nothing to the DLQ itself.
func RunSQS(ctx context.Context, deps SQSDeps) error {
	out := deps.Out
	if out == nil {
		out = io.Discard
	}
	for ctx.Err() == nil {
		got, err := deps.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(deps.QueueURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("worker: receive from SQS: %w", err)
		}
		for _, m := range got.Messages {
			job, err := DecodeJob([]byte(aws.ToString(m.Body)))
			if err != nil {
				fmt.Fprintf(out, "left %s: %v\n", aws.ToString(m.MessageId), err)
				continue
			}
			outcome, err := ExpireOnce(ctx, deps.Pool, job)
			var notDue *NotDueError
			switch {
			case errors.As(err, &notDue), err != nil:
				fmt.Fprintf(out, "left %s (%s): %v\n", job.ReservationID, aws.ToString(m.MessageId), err)
				continue
			}
			// The commit is done: a delete that fails hands the job out
			// again, and ExpireOnce takes it as the duplicate it is.
			del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, err = deps.Client.DeleteMessage(del, &sqs.DeleteMessageInput{QueueUrl: aws.String(deps.QueueURL), ReceiptHandle: m.ReceiptHandle})
			cancel()
			if err != nil {
				fmt.Fprintf(out, "delete %s after commit: %v\n", job.ReservationID, err)
				continue
			}
			fmt.Fprintf(out, "%s %s\n", outcome, job.ReservationID)
		}
	}
	return nil
}
