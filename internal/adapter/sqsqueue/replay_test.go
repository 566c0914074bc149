package sqsqueue_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// sqsPeople are a test's database and the people who capture, request,
// approve and run, each with a login of their own that is neither a
// superuser nor the owner.
type sqsPeople struct {
	db               *pgtest.Database
	ivan, alice, bob *pgtest.Login
}

func setupPeople(t *testing.T) *sqsPeople {
	t.Helper()
	db := pgtest.New(t)
	p := &sqsPeople{db: db, ivan: db.Login(t, "ivan", "expiryctl_ingester"), alice: db.Login(t, "alice", "expiryctl_operator"),
		bob: db.Login(t, "bob", "expiryctl_approver")}
	owner := pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner))
	res, err := replay.SetPolicy(context.Background(), owner, "", map[string]any{"approvers": []string{p.bob.Name}, "canary_window": "1s"})
	if err != nil || !res.Applied {
		t.Fatalf("owner bootstrap: %+v, %v", res, err)
	}
	return p
}

// TestReplayToSQS is the governed replay of letters captured from SQS:
// one that SQS's redrive moved (goaws names no origin for it, so the
// request names the queue) and one a worker dead-lettered with
// x-original-queue. alice requests, bob approves, alice runs; the jobs
// come back on the work queue with every attribute and its type, the
// body byte for byte, and the replay's own attributes. The bookkeeping of
// the failure is gone.
func TestReplayToSQS(t *testing.T) {
	ctx := context.Background()
	client := sqstest.Client(t)
	p := setupPeople(t)
	work, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)

	body := `{"reservation_id":"r-8421","expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-8421:v3"}`
	sent := map[string]types.MessageAttributeValue{
		"as-number": {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"float":     {DataType: aws.String("Number.float"), StringValue: aws.String("3.25")},
		"png":       {DataType: aws.String("Binary.png"), BinaryValue: []byte("\x89PNG\r\n\x00\xff")},
		"unicode":   {DataType: aws.String("String"), StringValue: aws.String("r-\u6f22\u5b57 <&>")},
		"json":      {DataType: aws.String("String.json"), StringValue: aws.String(`{"a":1}`)},
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(work.URL), MessageBody: aws.String(body), MessageAttributes: sent}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work.URL), WaitTimeSeconds: 5}); err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive from the work queue: %v", err)
	}
	waitVisible(t, client, dlq.URL, 1)

	src := openSource(t, client, dlq.URL, 100)
	if _, err := deadletter.Ingest(ctx, p.ivan.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "ivan"}); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	page, err := deadletter.NewArchive(p.alice.Pool, "alice").List(ctx, deadletter.Filter{}, nil, 10)
	if err != nil || len(page.Rows) != 1 {
		t.Fatalf("archive: %v, %d letters", err, len(page.Rows))
	}
	ids := []int64{page.Rows[0].ID}

	// A request that names no queue is refused: goaws says no origin.
	_, err = (&replay.Service{Pool: p.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: ids}, Why: "INC-33", SameHandlerWhy: "SQS shows no consumers"})
	var refusal *store.Refusal
	if !errors.As(err, &refusal) || refusal.Rule != "target" {
		t.Fatalf("a request naming no queue for a letter with no origin: %v, want refused by target", err)
	}
	created, err := (&replay.Service{Pool: p.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: ids}, Why: "INC-33", SameHandlerWhy: "SQS shows no consumers", ToRoutingKey: work.ARN})
	if err != nil {
		t.Fatal(err)
	}
	req := created.Request
	if req.System() != deadletter.SQS || len(req.Targets) != 1 || req.Targets[0].RoutingKey != work.ARN {
		t.Fatalf("request targets %+v, want the SQS queue %s", req.Targets, work.ARN)
	}
	approver := &replay.Service{Pool: p.bob.Pool}
	shown, err := approver.Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Approve(ctx, req.ID, replay.ReviewOptions{Why: "ok", CohortHash: shown.CohortHash}); err != nil {
		t.Fatal(err)
	}
	publisher := sqsqueue.NewPublisher(client)
	defer publisher.Close()
	runner := &replay.Runner{Pool: p.alice.Pool, Broker: publisher, Actor: "alice",
		OpenDLQ: func(_ context.Context, queue string) (deadletter.ClosableSource, error) {
			ref, err := sqsqueue.ParseQueueRef(queue)
			if err != nil {
				return nil, err
			}
			q, err := sqsqueue.FindQueue(ctx, client, ref)
			if err != nil {
				return nil, err
			}
			return sqsqueue.OpenDLQSource(client, q, sqsqueue.SourceOptions{Prefetch: 100, Wait: time.Second}), nil
		}}
	res, err := runner.Run(ctx, req.ID)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Status != replay.StatusCompleted || res.Confirmed != 1 {
		t.Fatalf("run: %+v, want completed with 1 confirmed", res)
	}

	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work.URL), WaitTimeSeconds: 5, MaxNumberOfMessages: 10,
		MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("the replayed job on the work queue: %v, %d messages", err, len(out.Messages))
	}
	got := out.Messages[0]
	if aws.ToString(got.Body) != body {
		t.Errorf("body %q, want %q", aws.ToString(got.Body), body)
	}
	for name, want := range sent {
		g, ok := got.MessageAttributes[name]
		if !ok || aws.ToString(g.DataType) != aws.ToString(want.DataType) || aws.ToString(g.StringValue) != aws.ToString(want.StringValue) ||
			!slices.Equal(g.BinaryValue, want.BinaryValue) {
			t.Errorf("attribute %s = %s %q %v, want %s %q %v", name, aws.ToString(g.DataType), aws.ToString(g.StringValue), g.BinaryValue,
				aws.ToString(want.DataType), aws.ToString(want.StringValue), want.BinaryValue)
		}
	}
	if r := got.MessageAttributes[replay.HeaderReplayRequest]; aws.ToString(r.DataType) != "Number" || aws.ToString(r.StringValue) != strconv.FormatInt(req.ID, 10) {
		t.Errorf("%s = %s %q, want Number %d", replay.HeaderReplayRequest, aws.ToString(r.DataType), aws.ToString(r.StringValue), req.ID)
	}
	if c := got.MessageAttributes[replay.HeaderReplayCount]; aws.ToString(c.StringValue) != "1" {
		t.Errorf("%s = %q, want 1", replay.HeaderReplayCount, aws.ToString(c.StringValue))
	}
	if len(got.MessageAttributes) > 10 {
		t.Errorf("%d attributes: SQS takes 10", len(got.MessageAttributes))
	}
}

// TestReplayToSQSDelaysUntilNotBefore: a cohort scheduled a few seconds
// ahead is sent at once, each message carrying the rest of the wait as
// SQS's delivery delay, so the run does not hold it; no job is on the
// queue before its time, and they arrive at the approved rate (2/s), not
// all at that moment.
func TestReplayToSQSDelaysUntilNotBefore(t *testing.T) {
	ctx := context.Background()
	client := sqstest.Client(t)
	p := setupPeople(t)
	work, dlq := sqstest.CreateWithDLQ(t, client, 1, 1)
	const n = 4
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = []byte(`{"reservation_id":"r-late-` + strconv.Itoa(i) + `","idempotency_key":"expire:r-late-` + strconv.Itoa(i) + `:v1"}`)
	}
	sendSeq(t, client, dlq.URL, bodies)
	src := openSource(t, client, dlq.URL, 10)
	if _, err := deadletter.Ingest(ctx, p.ivan.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "ivan"}); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	page, err := deadletter.NewArchive(p.alice.Pool, "alice").List(ctx, deadletter.Filter{}, nil, 10)
	if err != nil || len(page.Rows) != n {
		t.Fatalf("archive: %v", err)
	}
	ids := make([]int64, 0, n)
	for _, r := range page.Rows {
		ids = append(ids, r.ID)
	}
	notBefore := time.Now().Add(6 * time.Second)
	created, err := (&replay.Service{Pool: p.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Rate: 2,
		Selection: replay.Selection{IDs: ids}, Why: "INC-33", SameHandlerWhy: "SQS shows no consumers", Canary: new(int),
		ToRoutingKey: work.ARN, NotBefore: &notBefore, UnwatchedWhy: "the test watches the queue itself"})
	if err != nil {
		t.Fatal(err)
	}
	shown, err := (&replay.Service{Pool: p.bob.Pool}).Show(ctx, created.Request.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&replay.Service{Pool: p.bob.Pool}).Approve(ctx, created.Request.ID, replay.ReviewOptions{Why: "ok", CohortHash: shown.CohortHash}); err != nil {
		t.Fatal(err)
	}
	publisher := sqsqueue.NewPublisher(client)
	defer publisher.Close()
	published := make(chan time.Time, 1)
	runner := &replay.Runner{Pool: p.alice.Pool, Broker: publisher, Actor: "alice", Progress: func(pr replay.Progress) {
		if pr.Published > 0 {
			select {
			case published <- time.Now():
			default:
			}
		}
	}}
	done := make(chan error, 1)
	go func() { _, err := runner.Run(ctx, created.Request.ID); done <- err }()
	var sentAt time.Time
	select {
	case sentAt = <-published:
	case err := <-done:
		t.Fatalf("run ended before publishing: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("nothing published")
	}
	if !sentAt.Before(notBefore.Add(-2 * time.Second)) {
		t.Errorf("published at %s, %s before its time: the run held it rather than delaying it on SQS", sentAt.Format(time.TimeOnly), notBefore.Sub(sentAt))
	}
	var arrivals []time.Time
	for len(arrivals) < n && time.Now().Before(notBefore.Add(15*time.Second)) {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(work.URL), WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			now := time.Now()
			if now.Before(notBefore) {
				t.Errorf("a job was on the queue %s before its time", notBefore.Sub(now))
			}
			arrivals = append(arrivals, now)
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(work.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(arrivals) != n {
		t.Fatalf("%d of %d delayed jobs came", len(arrivals), n)
	}
	// At 2/s the four are handed out over 1.5 s; at once they would come
	// in one receive.
	if spread := arrivals[n-1].Sub(arrivals[0]); spread < time.Second {
		t.Errorf("the %d jobs arrived within %s: a delayed cohort must arrive at the approved rate, not at once", n, spread)
	}
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
