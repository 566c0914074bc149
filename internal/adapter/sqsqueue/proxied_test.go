package sqsqueue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// awsEnv gives sqsqueue.NewClient the configuration the CLI reads: static
// credentials goaws accepts, the region, and no instance metadata, which
// the SDK would otherwise wait on when it finds no credentials.
func awsEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "sqstest")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sqstest")
	t.Setenv("AWS_REGION", sqstest.Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// A developer's own profile and files must not leak into the test.
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
}

// letterBody is letter i's body: a reservation of its own.
func letterBody(i int) string {
	return fmt.Sprintf(`{"reservation_id":"r-%d","expected_version":1,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-%d:v1"}`, i, i)
}

// sendLetters puts n letters straight into url (not through a proxy) and
// waits until the server shows them all. goaws's SendMessageBatch answer
// names no entry, so the count is what says they arrived.
func sendLetters(t *testing.T, client *sqs.Client, url string, n int) {
	t.Helper()
	ctx := context.Background()
	for first := 0; first < n; first += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i := first; i < min(first+10, n); i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(letterBody(i))})
		}
		if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			t.Fatalf("send letters %d…: %v", first, err)
		}
	}
	waitVisible(t, client, url, n)
}

// proxiedClient is a client for url's queue through p, built as the CLI
// builds one (sqsqueue.NewClient), and the queue's reference through p.
func proxiedClient(t *testing.T, p *sqstest.FaultProxy, url string) (*sqs.Client, sqsqueue.QueueRef) {
	t.Helper()
	ref, err := sqsqueue.ParseQueueRef(p.QueueURL(url))
	if err != nil {
		t.Fatal(err)
	}
	client, err := sqsqueue.NewClient(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return client, ref
}

// proxiedSource opens a DLQSource on url through p, with a client built as
// the CLI builds one and short polls.
func proxiedSource(t *testing.T, p *sqstest.FaultProxy, url string, opts sqsqueue.SourceOptions) *sqsqueue.DLQSource {
	t.Helper()
	client, ref := proxiedClient(t, p, url)
	queue, err := sqsqueue.FindQueue(context.Background(), client, ref)
	if err != nil {
		t.Fatalf("find the queue through the proxy: %v", err)
	}
	if opts.Wait == 0 {
		opts.Wait = time.Second
	}
	return sqsqueue.OpenDLQSource(client, queue, opts)
}

// checkArchived fails t unless db holds each of letters once, by row and
// by reservation.
func checkArchived(t *testing.T, db *pgtest.Database, letters int) {
	t.Helper()
	var rows, reservations int
	var missing []string
	err := db.Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT reservation_id),
		coalesce(array_agg(r) FILTER (WHERE d.reservation_id IS NULL), '{}')
		FROM (SELECT 'r-' || i AS r FROM generate_series(0, $1 - 1) i) want
		FULL JOIN expiryctl.dead_letters d ON d.reservation_id = want.r`, letters).Scan(&rows, &reservations, &missing)
	if err != nil {
		t.Fatal(err)
	}
	if rows != letters || reservations != letters || len(missing) != 0 {
		t.Errorf("archive: %d rows, %d distinct reservations, missing %v; want each of the %d letters once", rows, reservations, missing, letters)
	}
}

// waitEmpty waits until url holds no message, visible or in flight: a
// message received by a call whose answer was lost is in flight until its
// visibility runs out.
func waitEmpty(t *testing.T, client *sqs.Client, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		visible, inFlight := sqstest.Approximate(t, client, url)
		if visible+inFlight == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the DLQ still holds %d visible and %d in flight after %s: every stored letter must be deleted", visible, inFlight, within)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// faultSeed is the seed of a test's fault draws: EXPIRYCTL_FAULT_SEED to
// replay a run, else a fresh one; logged either way. The draws replay
// exactly only where requests come in the same order.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("EXPIRYCTL_FAULT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EXPIRYCTL_FAULT_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from EXPIRYCTL_FAULT_SEED)", n)
		return n
	}
	n := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with EXPIRYCTL_FAULT_SEED=%d)", n, n)
	return n
}
