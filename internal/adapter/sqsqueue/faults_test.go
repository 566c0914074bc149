//go:build faults

package sqsqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// TestIngestRidesOutThrottlesAnd5xx captures 300 letters while about a
// third of the calls to SQS are throttled, answered 500 or 503, or cut
// off, some before the server saw them and some after it did the work
// (a receive whose messages never arrive, a delete that happened though
// the client heard it failed). The SDK's retries carry the ingest
// through: each letter is stored once and deleted.
func TestIngestRidesOutThrottlesAnd5xx(t *testing.T) {
	awsEnv(t)
	const letters = 300
	seed := faultSeed(t)
	direct := sqstest.Client(t)
	db := pgtest.New(t)
	url, _ := sqstest.CreateQueue(t, direct, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "3"})
	sendLetters(t, direct, url, letters)

	p := sqstest.NewFaultProxy(t, sqstest.Endpoint(), seed)
	var mix []sqstest.Fault
	kinds := []sqstest.FaultKind{sqstest.Throttle, sqstest.RequestThrottled, sqstest.InternalError, sqstest.Unavailable, sqstest.Reset}
	for _, kind := range kinds {
		mix = append(mix, sqstest.Fault{Kind: kind}, sqstest.Fault{Kind: kind, After: true})
	}
	p.Inject(sqstest.FaultRule{Rate: 0.3, Faults: mix})

	start := time.Now()
	src := proxiedSource(t, p, url, sqsqueue.SourceOptions{Prefetch: 100, Visibility: 3 * time.Second})
	stats, err := deadletter.Ingest(context.Background(), db.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test", Batch: 25})
	_ = src.Close()
	elapsed := time.Since(start)
	faults := p.Stats()
	p.Clear()
	t.Logf("%d letters in %s: ingest %+v; proxy: %s", letters, elapsed.Round(time.Millisecond), stats, faults)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}

	checkArchived(t, db, letters)
	if stats.Stored != letters || stats.Received != stats.Stored+stats.Duplicates {
		t.Errorf("ingest counted %+v: want %d stored, and every other letter received a duplicate", stats, letters)
	}
	waitEmpty(t, direct, url, 10*time.Second)

	// The faults were there, of every kind, before and after the server
	// did the work, and the SDK's retries got past them: every call
	// faulted passed on a later attempt, but those still backing off as
	// the source closed.
	byKind, byStage := map[sqstest.FaultKind]int{}, map[bool]int{}
	for f, n := range faults.Faults {
		byKind[f.Kind] += n
		byStage[f.After] += n
	}
	for _, kind := range kinds {
		if byKind[kind] == 0 {
			t.Errorf("no %s was injected: %s", kind, faults)
		}
	}
	if byStage[false] == 0 || byStage[true] == 0 {
		t.Errorf("faults before forwarding %d, after %d: want both", byStage[false], byStage[true])
	}
	retries := 0
	for _, n := range faults.Retries {
		retries += n
	}
	if faults.Injected() < 20 || retries < faults.Injected()-faults.Unrecovered || faults.Recovered == 0 {
		t.Errorf("%d faults injected, %d retries, %d faulted calls recovered: want the faults retried", faults.Injected(), retries, faults.Recovered)
	}
	if faults.FaultedOps["ReceiveMessage"] == 0 || faults.FaultedOps["DeleteMessageBatch"] == 0 {
		t.Errorf("receives and deletes should both be faulted: %s", faults)
	}
}
