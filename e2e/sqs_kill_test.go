package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// sqsCLI is a cli whose commands reach SQS as the test servers' do: with
// static credentials goaws accepts, in the region its ARNs name, and
// without asking instance metadata, which the SDK would otherwise wait on.
func sqsCLI(dbURL string) *cli {
	c := newCLI(dbURL, "")
	c.env = append(c.env, "AWS_ACCESS_KEY_ID=e2e", "AWS_SECRET_ACCESS_KEY=e2e", "AWS_REGION="+sqstest.Region,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	return c
}

// sendSQSLetters puts letters first…first+n-1 into queue (a URL the
// client's endpoint serves), ten to a call, each a reservation of its own,
// and waits until the queue shows at least least messages: goaws's
// SendMessageBatch answer names no entry, so its count says they arrived.
func sendSQSLetters(t testing.TB, client *sqs.Client, queue string, first, n, least int) {
	t.Helper()
	ctx := withTimeout(t)
	for i := first; i < first+n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, first+n); j++ {
			body := fmt.Sprintf(`{"reservation_id":"r-%d","expected_version":1,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-%d:v1"}`, j, j)
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(body)})
		}
		if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries}); err != nil {
			t.Fatalf("send letters %d…: %v", i, err)
		}
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("%d messages in the queue", least), func() bool {
		visible, _ := sqstest.Approximate(t, client, queue)
		return visible >= least
	})
}

// checkSQSArchived fails t unless the archive holds each of the letters
// r-0…r-(letters-1) once.
func checkSQSArchived(t testing.TB, db *pgtest.Database, letters int) {
	t.Helper()
	var stored, reservations int
	var missing []string
	err := db.Pool.QueryRow(withTimeout(t), `SELECT count(d.id), count(DISTINCT d.reservation_id),
		coalesce(array_agg(want.r) FILTER (WHERE d.id IS NULL), '{}')
		FROM (SELECT 'r-' || i AS r FROM generate_series(0, $1 - 1) i) want
		FULL JOIN expiryctl.dead_letters d ON d.reservation_id = want.r`, letters).Scan(&stored, &reservations, &missing)
	if err != nil {
		t.Fatal(err)
	}
	if stored != letters || reservations != letters || len(missing) != 0 {
		t.Errorf("archive: %d rows, %d distinct reservations, missing %v; want each of the %d letters once", stored, reservations, missing, letters)
	}
}

// waitSQSEmpty waits until queue holds nothing, visible or in flight.
func waitSQSEmpty(t testing.TB, client *sqs.Client, queue string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the DLQ empty, nothing visible or in flight", func() bool {
		visible, inFlight := sqstest.Approximate(t, client, queue)
		return visible+inFlight == 0
	})
}

// batchDuplicates is the duplicates the committed batches' audit rows
// counted: copies of letters already stored.
func batchDuplicates(t testing.TB, db *pgtest.Database) int {
	return count(t, db.Pool, `SELECT coalesce(sum((details->>'duplicates')::int), 0)
		FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch'`)
}

// TestSQSKilledIngestStoresOnce kills `dlq ingest` of 2000 SQS letters
// with SIGKILL at random points after its run's first commit, three
// times, then captures the rest: every letter is archived once and the
// DLQ ends empty, once what the killed runs held became visible again.
func TestSQSKilledIngestStoresOnce(t *testing.T) {
	t.Parallel()
	const (
		letters = 2000
		kills   = 3
		batch   = "20"
	)
	client := sqstest.Client(t)
	db := pgtest.New(t)
	queue, _ := sqstest.CreateQueue(t, client, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "3"})
	sendSQSLetters(t, client, queue, 0, letters, letters)
	direct := sqstest.At(sqstest.Endpoint(), queue)
	c := sqsCLI(db.Login(t, "ivan", "expiryctl_ingester").URL)

	rng := rand.New(rand.NewPCG(seed(t), 0))
	start := time.Now()
	var trail []string
	for run, killed := 1, 0; killed < kills; run++ {
		if run > 2*kills {
			t.Fatalf("only %d of %d runs could be killed: %s", killed, run-1, strings.Join(trail, "; "))
		}
		before := rows(t, db.Pool)
		// The kill comes once the run stored a random share of what is
		// left, up to a quarter: at least its first batch, and never so
		// much that later runs find the queue drained. A capture goes at
		// thousands of letters a second, too fast to aim at with a delay.
		target := before + 1 + rng.IntN(max((letters-before)/4, 1))
		p := c.start(t, "dlq", "ingest", "--queue", direct, "--batch", batch)
		waitFor(t, 30*time.Second, fmt.Sprintf("run %d to store %d letters", run, target-before), func() bool {
			return rows(t, db.Pool) >= target || p.exited()
		})
		if p.exited() {
			if res := p.wait(time.Second); res.code != 0 {
				t.Fatalf("run %d: %s", run, res)
			}
			trail = append(trail, fmt.Sprintf("run %d drained the queue before its kill", run))
			continue
		}
		p.signal(syscall.SIGKILL)
		res := p.wait(10 * time.Second)
		if res.code == 0 {
			// It drained the queue and exited between the look above and
			// the signal.
			trail = append(trail, fmt.Sprintf("run %d drained the queue before its kill", run))
			continue
		}
		if res.code != -1 {
			t.Fatalf("run %d should have died of SIGKILL: %s", run, res)
		}
		killed++
		after := rows(t, db.Pool)
		visible, inFlight := sqstest.Approximate(t, client, queue)
		// goaws counts the messages in flight among the visible ones too.
		trail = append(trail, fmt.Sprintf("kill %d aimed at %d stored: %d stored (+%d), SQS counts %d visible and %d in flight",
			killed, target, after, after-before, visible, inFlight))
	}

	final := c.ok(t, "dlq", "ingest", "--queue", direct, "--batch", batch)
	checkSQSArchived(t, db, letters)
	waitSQSEmpty(t, client, queue)
	t.Logf("%d letters, %d kills in %s: %s; final run: %s; %d redelivered copies skipped as duplicates",
		letters, kills, time.Since(start).Round(time.Millisecond), strings.Join(trail, "; "),
		regexp.MustCompile(`ingested .*`).FindString(final.stderr), batchDuplicates(t, db))
}
