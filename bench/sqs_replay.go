package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/replay"
)

// sqsReplayWindow is how many messages the replay runner keeps unsettled
// (replay.Runner's window, 1000 by default). sqsqueue.Publisher sends
// them ten to a SendMessageBatch call, at most 64 calls at once; the bare
// batch publisher keeps as many messages in flight, ten to a call.
const sqsReplayWindow = 1000

// benchSQSReplay is the sqs-replay scenario. It archives N letters as if
// captured from an SQS dead-letter queue (System sqs, SourceQueue the
// DLQ's ARN, OriginQueue the work queue's ARN, the contract's attributes
// as typed headers), approves a request for them at a rate ceiling the
// limiter never reaches, and times replay.Runner sending them back
// through sqsqueue.Publisher, from the Run call to its return, against a
// bare SendMessageBatch publisher of the same bodies and attributes with
// the same messages in flight, timed from its first call to its last
// answer, before and after the subject. A bare SendMessage publisher, one
// call a message with the runner's window in flight, is measured once
// beside them (report only): what sending one message a call costs. The
// CPU a message of the runner's process, goaws and PostgreSQL is reported
// against the bare clients' too.
func benchSQSReplay(ctx context.Context, cfg *config, rep *report) error {
	const scenario = "sqs-replay"
	n := cfg.SQSReplayN
	client, retries, err := sqsClient(ctx, cfg.SQSEndpoint)
	if err != nil {
		return err
	}
	if pids, err := watchSQSServer(cfg.SQSEndpoint); err != nil {
		rep.note("%s: %v", scenario, err)
	} else {
		cfg.logf("%s: counting the CPU of pid %s as goaws's", scenario, pids)
	}
	queues, err := createSQSQueues(ctx, client, "work", "dlq")
	defer queues.delete(cfg.logf)
	if err != nil {
		return err
	}
	work, dlq := queues.byName["work"], queues.byName["dlq"]

	db, err := createDB(ctx, cfg.AdminURL, "sqsreplay")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	// The benchmark's policy: one request holds the whole cohort, at a
	// rate the limiter never reaches, and the target queue may fill up
	// without halting the run.
	operator, err := db.login(ctx, "operator", "expiryctl_operator")
	if err != nil {
		return err
	}
	approver, err := db.login(ctx, "approver", "expiryctl_approver")
	if err != nil {
		return err
	}
	changes, err := replay.ParsePolicyChanges([]string{fmt.Sprintf("max_cohort=%d", n),
		"max_rate=1000000000", "stop_queue_depth=100000000", "canary_window=1ms"})
	if err != nil {
		return err
	}
	if _, err := replay.SetPolicy(ctx, db.Pool, "bench", changes); err != nil {
		return err
	}
	cfg.logf("%s: archiving %d letters captured from %s, to go back to %s", scenario, n, dlq.Name, work.Name)
	if err := sqsReplaySeed(ctx, db.Pool, dlq, work.ARN, n); err != nil {
		return err
	}
	req, err := sqsReplayRequest(ctx, operator, approver, n)
	if err != nil {
		return err
	}
	if err := db.settle(ctx, cfg.logf); err != nil {
		return err
	}
	msgs := make([]sqsMessage, n)
	for i := range msgs {
		msgs[i] = sqsReplayMessage(i, work.ARN, req)
	}

	type phase struct {
		name    string
		wall    time.Duration
		cpu     cpuUse
		retries int64
	}
	var phases []phase
	measure := func(name string, fn func() (time.Duration, error)) (time.Duration, error) {
		retried := retries.count()
		mon := startCPU()
		d, err := fn()
		use := mon.Stop()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		phases = append(phases, phase{name, d, use, retries.count() - retried})
		cfg.logf("%s: %s: %d messages in %s = %.0f msg/s", scenario, name, n, d.Round(time.Millisecond), float64(n)/d.Seconds())
		// Each side is checked and emptied: a message sent twice (a send
		// retried after its answer was lost) shows here.
		if err := queues.expectDepth(ctx, work, n); err != nil {
			return 0, fmt.Errorf("after %s: %w", name, err)
		}
		if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(work.URL)}); err != nil {
			return 0, fmt.Errorf("purge %s: %w", work.Name, err)
		}
		return d, queues.expectDepth(ctx, work, 0)
	}
	batches := func() (time.Duration, error) {
		start := time.Now()
		err := sendBatches(ctx, client, work, msgs, sqsReplayWindow/10)
		return time.Since(start), err
	}

	cfg.logf("%s: baseline: bare SendMessageBatch of %d to %s, %d calls of 10 in flight", scenario, n, work.Name, sqsReplayWindow/10)
	bare1, err := measure("baseline SendMessageBatch", batches)
	if err != nil {
		return err
	}
	cfg.logf("%s: subject: replay.Runner over request %d (%d items, rate ceiling 1e9/s) through sqsqueue.Publisher", scenario, req.ID, n)
	subj, err := measure("subject replay.Runner", func() (time.Duration, error) {
		return sqsReplaySubject(ctx, client, operator, req.ID, n)
	})
	if err != nil {
		return err
	}
	bare2, err := measure("baseline SendMessageBatch again", batches)
	if err != nil {
		return err
	}
	cfg.logf("%s: bare SendMessage of %d to %s, one a call, %d calls in flight", scenario, n, work.Name, sqsReplayWindow)
	single, err := measure("bare SendMessage", func() (time.Duration, error) {
		start := time.Now()
		err := sendEach(ctx, client, work, msgs, sqsReplayWindow)
		return time.Since(start), err
	})
	if err != nil {
		return err
	}

	baseRate := float64(2*n) / (bare1 + bare2).Seconds()
	subjRate := float64(n) / subj.Seconds()
	singleRate := float64(n) / single.Seconds()
	rep.throughputInfo(fmt.Sprintf("8 sqs-replay %s: replay.Runner to SQS vs bare SendMessageBatch", count(n)), baseRate, subjRate, "msg/s")
	rep.throughputInfo(fmt.Sprintf("8 sqs-replay %s: bare SendMessage, one a call, vs bare SendMessageBatch", count(n)), baseRate, singleRate, "msg/s")
	rep.throughputInfo(fmt.Sprintf("8 sqs-replay %s: replay.Runner to SQS vs bare SendMessage", count(n)), singleRate, subjRate, "msg/s")
	// CPU a message against the bare clients, as issue 36 asks of every
	// source: the runner's process and the server against the bare
	// SendMessageBatch publisher's (the same calls; the mean of its two
	// runs), all together against both bare publishers'.
	batch, subject, each := cpuUse{Groups: map[string]float64{}}, phases[1].cpu, phases[3].cpu
	for _, g := range []string{"bench", "goaws"} {
		batch.Groups[g] = (phases[0].cpu.Groups[g] + phases[2].cpu.Groups[g]) / 2
	}
	rep.cpuPerItem("8 sqs-replay CPU a message: the runner's process vs bare SendMessageBatch's", batch.Groups["bench"], subject.Groups["bench"], n, 0)
	rep.cpuPerItem("8 sqs-replay CPU a message: the SQS server vs under bare SendMessageBatch", batch.Groups["goaws"], subject.Groups["goaws"], n, 0)
	rep.cpuPerItem("8 sqs-replay CPU a message: PostgreSQL (no floor: the bare clients record nothing)", 0, subject.Groups["postgres"], n, 0)
	rep.cpuPerItem("8 sqs-replay CPU a message: all together vs bare SendMessageBatch",
		(phases[0].cpu.known()+phases[2].cpu.known())/2, subject.known(), n, 0)
	rep.cpuPerItem("8 sqs-replay CPU a message: all together vs bare SendMessage", each.known(), subject.known(), n, 0)
	for _, p := range phases {
		rep.note("sqs-replay %s: %s in %s; per message %s", p.name, p.cpu, fmtDuration(p.wall), p.cpu.PerItem(n))
		if p.retries > 0 {
			rep.note("WARNING: during sqs-replay %s, the SDK retried %d calls: their waits are in the figure", p.name, p.retries)
		}
		if share := p.cpu.OtherShare(p.wall); share > 0.15 {
			rep.note("WARNING: during sqs-replay %s, other processes used %.0f%% of the machine's CPU: the sqs-replay ratios are "+
				"unreliable in this run; rerun on a quieter machine", p.name, 100*share)
		}
	}
	rep.note("sqs-replay: sqsqueue.Publisher sends the runner's window of %d ten to a SendMessageBatch call, 64 calls at once; "+
		"the bare SendMessage publisher has the whole window in flight, one call a message, and the SDK's connection pool keeps "+
		"10 idle connections to a server, so most of its calls open a connection of their own", sqsReplayWindow)
	return nil
}

// sqsReplaySubject runs request id with replay.Runner through a fresh
// sqsqueue.Publisher, as `replay run` does for letters from SQS (no
// consumers or traffic to read, the cohort's DLQ captured while it runs),
// and returns its time from the Run call to its return.
func sqsReplaySubject(ctx context.Context, client *sqs.Client, operator *pgxpool.Pool, id int64, n int) (time.Duration, error) {
	publisher := sqsqueue.NewPublisher(client)
	defer publisher.Close()
	runner := &replay.Runner{Pool: operator, Broker: publisher, Actor: "bench", OpenDLQ: sqsReplayOpenDLQ(client)}
	start := time.Now()
	res, err := runner.Run(ctx, id)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.Status != replay.StatusCompleted || res.Confirmed != n {
		return 0, fmt.Errorf("the run ended %s with %d of %d confirmed", res.Status, res.Confirmed, n)
	}
	return took, nil
}

// sqsReplayOpenDLQ opens a run's capture of an SQS dead-letter queue, as
// `replay run` opens it for a request of SQS letters (the prefetch of
// `dlq ingest`, SQS's longest wait).
func sqsReplayOpenDLQ(client *sqs.Client) replay.OpenDLQ {
	return func(ctx context.Context, queue string) (deadletter.ClosableSource, error) {
		ref, err := sqsqueue.ParseQueueRef(queue)
		if err != nil {
			return nil, err
		}
		q, err := sqsqueue.FindQueue(ctx, client, ref)
		if err != nil {
			return nil, err
		}
		return sqsqueue.OpenDLQSource(client, q, sqsqueue.SourceOptions{Prefetch: 1000}), nil
	}
}

// sqsReplaySeed archives n letters as `dlq ingest` stores them from dlq:
// sqsWorkerLetter(i) received from it (with the system attributes goaws
// gives a received message), through sqsqueue.Letter and deadletter.Parse.
// Their origin, x-original-queue, is origin.
func sqsReplaySeed(ctx context.Context, pool *pgxpool.Pool, dlq sqsqueue.Queue, origin string, n int) error {
	const batch = 5000
	now := time.Now()
	received := strconv.FormatInt(now.UnixMilli(), 10)
	for lo := 0; lo < n; lo += batch {
		letters := make([]deadletter.Letter, 0, batch)
		for i := lo; i < min(lo+batch, n); i++ {
			m := sqsWorkerLetter(i, origin)
			msg := types.Message{Body: aws.String(m.body), MessageId: aws.String(fmt.Sprintf("bench-%08d", i)),
				MessageAttributes: m.attributes, Attributes: map[string]string{"SenderId": "100010001000",
					"SentTimestamp": received, "ApproximateFirstReceiveTimestamp": received, "ApproximateReceiveCount": "1"}}
			letters = append(letters, deadletter.Parse(sqsqueue.Letter(dlq, msg), nil, now))
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := deadletter.Insert(ctx, tx, letters)
			return err
		})
		if err != nil {
			return fmt.Errorf("archive letters: %w", err)
		}
	}
	return nil
}

// sqsReplayRequest freezes the n waiting letters into a request with no
// canary at a rate the limiter never reaches, as the operator's login,
// and approves it as the approver's. Each letter goes back to its
// x-original-queue.
func sqsReplayRequest(ctx context.Context, operator, approverLogin *pgxpool.Pool, n int) (replay.Request, error) {
	svc := &replay.Service{Pool: operator, Actor: "bench-requester"}
	approver := &replay.Service{Pool: approverLogin, Actor: "bench-approver"}
	zero := 0
	created, err := svc.Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{Max: n},
		Rate: 1e9, Canary: &zero, Why: "benchmark",
		// SQS shows no consumers, so an SQS replay always needs the
		// reason; the seeded letters include permanent categories.
		SameHandlerWhy: "benchmark: the target queue is measured, not consumed", IncludePermanent: true})
	if err != nil {
		return replay.Request{}, fmt.Errorf("create the replay request: %w", err)
	}
	if created.Request.Items != n {
		return replay.Request{}, fmt.Errorf("the request froze %d letters, want %d", created.Request.Items, n)
	}
	if created.Request.System() != deadletter.SQS {
		return replay.Request{}, fmt.Errorf("the request targets %v, want SQS queues", created.Request.Targets)
	}
	req, err := approver.Approve(ctx, created.Request.ID, replay.ReviewOptions{Why: "benchmark", CohortHash: created.Request.CohortHash})
	if err != nil {
		return replay.Request{}, fmt.Errorf("approve the replay request: %w", err)
	}
	return req, nil
}

// sqsReplayMessage is what the runner sends for letter n of req: its body,
// its attributes minus the failure's bookkeeping (x-original-queue is
// left), and the six that name the replay.
func sqsReplayMessage(n int, origin string, req replay.Request) sqsMessage {
	m := sqsWorkerLetter(n, origin)
	attrs := map[string]types.MessageAttributeValue{}
	for name, v := range m.attributes {
		switch name {
		case "x-error-class", "x-last-error", "x-attempt-history":
			continue
		}
		attrs[name] = v
	}
	num := func(v int64) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(v, 10))}
	}
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	attrs[replay.HeaderReplayRequest] = num(req.ID)
	attrs[replay.HeaderReplayCount] = num(1)
	attrs[replay.HeaderReplayItem] = num(int64(n + 1))
	attrs[replay.HeaderReplayedBy] = str("bench")
	attrs[replay.HeaderApprovedBy] = str(req.ReviewedBy)
	attrs[replay.HeaderReplayedAt] = str(time.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
	return sqsMessage{body: m.body, attributes: attrs}
}

// sendEach sends msgs to queue with one SendMessage call each, up to
// inFlight at once, as sqsqueue.Publisher does under the runner's window.
func sendEach(ctx context.Context, client *sqs.Client, queue sqsqueue.Queue, msgs []sqsMessage, inFlight int) error {
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, m := range msgs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue.URL), MessageBody: aws.String(m.body),
				MessageAttributes: m.attributes}); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d sends to SQS queue %s failed, the first: %s", len(errs), len(msgs), queue.Name, strings.TrimSpace(errs[0]))
	}
	return nil
}
