package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
)

// sqsDeleteConcurrency is how many DeleteMessageBatch calls
// sqsqueue.DLQSource.Acknowledge has in flight at once; the bare drain uses
// as many.
const sqsDeleteConcurrency = 4

// benchSQSIngest is the sqs-ingest scenario. It fills three SQS dead-letter
// queues with the same N worker letters (sqsWorkerLetter), each as long as
// the others because goaws's cost per message grows with the length of the
// queue (each receive and each delete walks the whole queue), drains A1
// with a bare receive-and-delete loop, then B with deadletter.Ingest
// through sqsqueue.DLQSource into a fresh archive, then A2 with the bare
// loop again, so that the baseline brackets the subject and drift in what
// else the machine does lands on both.
func benchSQSIngest(ctx context.Context, cfg *config, rep *report) error {
	const scenario = "sqs-ingest"
	n := cfg.SQSIngestN
	client, retries, err := sqsClient(ctx, cfg.SQSEndpoint)
	if err != nil {
		return err
	}
	if pids, err := watchSQSServer(cfg.SQSEndpoint); err != nil {
		rep.note("%s: %v", scenario, err)
	} else {
		cfg.logf("%s: counting the CPU of pid %s as goaws's", scenario, pids)
	}
	queues, err := createSQSQueues(ctx, client, "a1-dlq", "b-dlq", "a2-dlq")
	defer queues.delete(cfg.logf)
	if err != nil {
		return err
	}
	b := queues.byName["b-dlq"]
	msgs := sqsWorkerLetters(0, n, sqsSiblingARN(b, "reservation-expiry"))
	cfg.logf("%s: sending %d letters to each of %s, %s, %s (SendMessageBatch, not timed)", scenario, n,
		queues.byName["a1-dlq"].Name, b.Name, queues.byName["a2-dlq"].Name)
	for _, name := range []string{"a1-dlq", "b-dlq", "a2-dlq"} {
		if err := queues.fill(ctx, queues.byName[name], msgs); err != nil {
			return err
		}
	}

	type phase struct {
		name    string
		wall    time.Duration
		cpu     cpuUse
		retries int64
		// baseline marks the bare loop's phases.
		baseline bool
	}
	var phases []phase
	drain := func(name string) (time.Duration, error) {
		q := queues.byName[name]
		cfg.logf("%s: baseline: bare receive and delete of %d from %s (one receive at a time, up to %d deletes)",
			scenario, n, q.Name, sqsDeleteConcurrency)
		retried := retries.count()
		mon := startCPU()
		d, err := sqsBareDrain(ctx, client, q, n)
		use := mon.Stop()
		retried = retries.count() - retried
		if err != nil {
			return 0, fmt.Errorf("baseline drain of %s: %w", q.Name, err)
		}
		if err := queues.expectDepth(ctx, q, 0); err != nil {
			return 0, err
		}
		phases = append(phases, phase{"baseline " + name, d, use, retried, true})
		cfg.logf("%s: baseline %d letters in %s = %.0f letters/s", scenario, n, d.Round(time.Millisecond), float64(n)/d.Seconds())
		return d, nil
	}

	base1, err := drain("a1-dlq")
	if err != nil {
		return err
	}
	db, err := createDB(ctx, cfg.AdminURL, "sqsingest")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	prefetch := ingestPrefetch(cfg.Prefetch, cfg.Batch)
	cfg.logf("%s: subject: deadletter.Ingest of %s into %s (prefetch %d, batch %s)", scenario, b.Name, db.Name, prefetch, batchName(cfg.Batch))
	retried := retries.count()
	mon := startCPU()
	subjDur, stats, err := sqsIngestInProcess(ctx, client, db.Pool, b, prefetch, cfg.Batch)
	subjCPU := mon.Stop()
	retried = retries.count() - retried
	if err != nil {
		return fmt.Errorf("deadletter.Ingest from SQS: %w", err)
	}
	if err := expectArchived(ctx, db.Pool, n); err != nil {
		return err
	}
	if err := queues.expectDepth(ctx, b, 0); err != nil {
		return fmt.Errorf("after the subject: %w", err)
	}
	phases = append(phases, phase{"subject deadletter.Ingest", subjDur, subjCPU, retried, false})
	subjRate := float64(n) / subjDur.Seconds()
	cfg.logf("%s: subject %d letters in %s = %.0f letters/s (%d batches)", scenario, stats.Received,
		subjDur.Round(time.Millisecond), subjRate, stats.Batches)
	base2, err := drain("a2-dlq")
	if err != nil {
		return err
	}
	baseRate := float64(2*n) / (base1 + base2).Seconds()
	rep.throughputInfo(fmt.Sprintf("7 sqs-ingest %s: deadletter.Ingest vs bare receive+delete", count(n)), baseRate, subjRate, "letters/s")
	// Capture must receive and delete each letter, as the bare loop does,
	// and PostgreSQL must store it: on a machine where goaws, PostgreSQL
	// and the capture share the cores, those two bound the rate whatever
	// the capturing process does beyond the bare loop.
	// The bare loop's CPU is goaws's and this process's: RabbitMQ and
	// PostgreSQL have no part in it, and what they did meanwhile was the
	// other engineers' work (PostgreSQL's WAL writer and checkpointer
	// count as the benchmark's in every phase).
	bare := cpuUse{Groups: map[string]float64{}}
	for _, p := range phases {
		if p.baseline {
			for _, g := range []string{"goaws", "bench"} {
				bare.Groups[g] += p.cpu.Groups[g] / 2
			}
		}
	}
	perLetter := func(seconds float64) float64 { return 1e6 * seconds / float64(n) }
	if floor := bare.known() + subjCPU.Groups["postgres"]; floor > 0 {
		ceiling := float64(runtime.NumCPU()) / (floor / float64(n))
		rep.throughputInfo("7 sqs-ingest ceiling: the cores, were capture to cost only the bare loop and its PostgreSQL, vs bare",
			baseRate, ceiling, "letters/s")
		rep.note("sqs-ingest ceiling: the bare loop takes %.1f µs of CPU a letter (%s) and the subject's PostgreSQL %.1f µs, "+
			"so %d cores allow at most %.0f letters/s (%.2f× the bare loop) before capture adds anything of its own; "+
			"the capturing process took %.1f µs a letter, the bare loop's %.1f µs",
			perLetter(bare.known()), bare.PerItem(n), perLetter(subjCPU.Groups["postgres"]), runtime.NumCPU(), ceiling, ceiling/baseRate,
			perLetter(subjCPU.Groups["bench"]), perLetter(bare.Groups["bench"]))
	}
	rep.cpuPerItem("7 sqs-ingest CPU a letter: the capturing process vs the bare loop's", bare.Groups["bench"], subjCPU.Groups["bench"], n, 0)
	rep.cpuPerItem("7 sqs-ingest CPU a letter: the SQS server vs under the bare loop", bare.Groups["goaws"], subjCPU.Groups["goaws"], n, 0)
	rep.cpuPerItem("7 sqs-ingest CPU a letter: PostgreSQL (no floor: the bare loop stores nothing)", 0, subjCPU.Groups["postgres"], n, 0)
	for _, p := range phases {
		rep.note("sqs-ingest %s: %s in %s; per letter %s", p.name, p.cpu, fmtDuration(p.wall), p.cpu.PerItem(n))
		if p.retries > 0 {
			rep.note("WARNING: during sqs-ingest %s, the SDK retried %d calls: a ReceiveMessage retried after its answer was lost "+
				"leaves its messages hidden for the visibility timeout, and that wait is in the figure", p.name, p.retries)
		}
		if share := p.cpu.OtherShare(p.wall); share > 0.15 {
			rep.note("WARNING: during sqs-ingest %s, other processes used %.0f%% of the machine's CPU: the sqs-ingest ratio is "+
				"unreliable in this run; rerun on a quieter machine", p.name, 100*share)
		}
	}
	return nil
}

// sqsBareDrain is the baseline: receiving and deleting, nothing else, with
// the concurrency sqsqueue.DLQSource has, so that the ratio shows what
// parsing and storing cost and not a difference in how many calls are in
// flight. DLQSource has one ReceiveMessage call in flight at a time, and
// Acknowledge deletes with up to sqsDeleteConcurrency DeleteMessageBatch
// calls at once; so does this loop: one receiver asks for 10 messages at a
// time (the subject's ask, every attribute, for the same answers to
// decode) and hands each batch to sqsDeleteConcurrency deleters. It deletes
// each batch as soon as it is received, where the subject holds up to its
// prefetch until their batch is stored: on goaws, whose receive walks the
// queue past the messages in flight, that costs the subject a little more
// per receive, and the subject's CPU note shows it in goaws's share. The
// clock stops when the last delete answered, checked by the queue's count.
func sqsBareDrain(ctx context.Context, client *sqs.Client, queue sqsqueue.Queue, n int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	batches := make(chan []types.DeleteMessageBatchRequestEntry, sqsDeleteConcurrency)
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	var deleters sync.WaitGroup
	for range sqsDeleteConcurrency {
		deleters.Add(1)
		go func() {
			defer deleters.Done()
			for entries := range batches {
				out, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queue.URL), Entries: entries})
				if err != nil {
					fail(err)
					continue
				}
				if len(out.Failed) > 0 {
					fail(fmt.Errorf("%d of %d deletes failed: %s", len(out.Failed), len(entries), aws.ToString(out.Failed[0].Message)))
				}
			}
		}()
	}
	received, empty := 0, 0
	for received < n && ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			VisibilityTimeout:           int32(queue.Visibility / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			fail(err)
			break
		}
		if len(out.Messages) == 0 {
			if empty++; empty == 5 {
				fail(fmt.Errorf("the queue answered empty 5 times after %d of %d messages", received, n))
				break
			}
			continue
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		received += len(out.Messages)
		select {
		case batches <- entries:
		case <-ctx.Done():
		}
	}
	close(batches)
	deleters.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if received != n {
		return 0, fmt.Errorf("received %d messages, want %d", received, n)
	}
	return elapsed, nil
}

// sqsIngestInProcess times what `dlq ingest --queue URL` does once it has
// found the queue: open sqsqueue.DLQSource with the prefetch the command
// asks for (its receive waits and visibility at their defaults, as the
// command leaves them), then deadletter.Ingest until SQS says the queue is
// empty. Ingest has to notice that (its linger timer, then
// GetQueueAttributes), which the bare drain, told N, does not: that tail
// is part of the product's cost.
func sqsIngestInProcess(ctx context.Context, client *sqs.Client, pool *pgxpool.Pool, queue sqsqueue.Queue, prefetch, batch int) (time.Duration, deadletter.IngestStats, error) {
	start := time.Now()
	src := sqsqueue.OpenDLQSource(client, queue, sqsqueue.SourceOptions{Prefetch: prefetch})
	defer src.Close()
	stats, err := deadletter.Ingest(ctx, pool, src, deadletter.IngestOptions{Actor: "bench", Queue: src.QueueName(), Batch: batch})
	return time.Since(start), stats, err
}
