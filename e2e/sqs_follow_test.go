//go:build faults

package e2e_test

import (
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/sqstest"
)

// TestFollowRidesOutSQSOutage cuts the network between a `dlq ingest
// --follow` and SQS (a toxiproxy in front of goaws, disabled: connections
// closed, new ones refused) while letters keep arriving, and restores it:
// the capture says it lost SQS and reconnected, stores every letter once,
// empties the DLQ, keeps running, and exits 0 on SIGTERM.
func TestFollowRidesOutSQSOutage(t *testing.T) {
	t.Parallel()
	const half = 100
	client := sqstest.Client(t)
	db := pgtest.New(t)
	queue, _ := sqstest.CreateQueue(t, client, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "5"})
	endpoint, err := url.Parse(sqstest.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFaultProxy(t, endpoint.Host)
	c := sqsCLI(db.Login(t, "ivan", "expiryctl_ingester").URL)
	ingest := c.start(t, "dlq", "ingest", "--queue", sqstest.At("http://"+proxy.address(), queue), "--follow", "--batch", "20")

	sendSQSLetters(t, client, queue, 0, half, 1)
	waitFor(t, 30*time.Second, "the first letters archived", func() bool { return rows(t, db.Pool) == half })

	// The SDK retries a refused connection for a few seconds before the
	// capture hears of it; the cut lasts until the capture says it lost
	// SQS, and then a few seconds of reconnecting more.
	proxy.proxy.Stop()
	cut := time.Now()
	sendSQSLetters(t, client, queue, half, half, 1)
	waitFor(t, 30*time.Second, "the capture to say it lost SQS", func() bool { return strings.Contains(ingest.stderr.String(), "lost SQS: ") })
	noticed := time.Since(cut)
	time.Sleep(3 * time.Second)
	if err := proxy.proxy.Start(); err != nil {
		t.Fatalf("restore the network: %v", err)
	}
	restored := time.Now()
	outage := restored.Sub(cut)

	waitFor(t, 60*time.Second, "every letter archived after the outage", func() bool { return rows(t, db.Pool) >= 2*half })
	caughtUp := time.Since(restored)
	waitSQSEmpty(t, client, queue)
	if ingest.exited() {
		t.Fatalf("dlq ingest --follow exited: %s", ingest.res)
	}
	checkSQSArchived(t, db, 2*half)

	ingest.signal(syscall.SIGTERM)
	res := ingest.wait(30 * time.Second)
	if res.code != 0 {
		t.Errorf("after SIGTERM: %s", res)
	}
	for _, want := range []string{"lost SQS: ", "reconnected to SQS after "} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the ingest's stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	for _, line := range strings.Split(res.stderr, "\n") {
		if strings.Contains(line, "SQS") || strings.Contains(line, "ingested") {
			t.Logf("ingest: %s", line)
		}
	}
	t.Logf("outage %s (the capture noticed after %s); every letter archived %s after the network came back; %d duplicates skipped",
		outage.Round(time.Millisecond), noticed.Round(time.Millisecond), caughtUp.Round(time.Millisecond), batchDuplicates(t, db))
}

// TestFollowNoticesASilentSQS: an SQS that keeps the connection and never
// answers (a toxiproxy timeout toxic holds every byte) is a lost server,
// not a quiet queue: the capture says it lost SQS within its receive's
// bound, reconnects once SQS answers again, and stores every letter once.
func TestFollowNoticesASilentSQS(t *testing.T) {
	t.Parallel()
	const half = 50
	client := sqstest.Client(t)
	db := pgtest.New(t)
	queue, _ := sqstest.CreateQueue(t, client, sqstest.Name(t, "-dlq"), map[string]string{"VisibilityTimeout": "5"})
	endpoint, err := url.Parse(sqstest.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFaultProxy(t, endpoint.Host)
	c := sqsCLI(db.Login(t, "ivan", "expiryctl_ingester").URL)
	ingest := c.start(t, "dlq", "ingest", "--queue", sqstest.At("http://"+proxy.address(), queue), "--follow", "--batch", "20")
	sendSQSLetters(t, client, queue, 0, half, 1)
	waitFor(t, 30*time.Second, "the first letters archived", func() bool { return rows(t, db.Pool) == half })

	proxy.add(t, `{"name": "silence", "type": "timeout", "stream": "downstream", "attributes": {"timeout": 0}}`)
	silent := time.Now()
	sendSQSLetters(t, client, queue, half, half, 1)
	// The receive's bound (its 20 s long poll and 40 s more) plus the
	// reopen's own tries.
	waitFor(t, 150*time.Second, "the capture to say it lost SQS", func() bool { return strings.Contains(ingest.stderr.String(), "lost SQS: ") })
	noticed := time.Since(silent)
	proxy.clear()
	waitFor(t, 120*time.Second, "every letter archived after SQS answers again", func() bool { return rows(t, db.Pool) >= 2*half })
	waitSQSEmpty(t, client, queue)
	checkSQSArchived(t, db, 2*half)
	ingest.signal(syscall.SIGTERM)
	if res := ingest.wait(30 * time.Second); res.code != 0 {
		t.Errorf("after SIGTERM: %s", res)
	}
	t.Logf("a silent SQS was noticed after %s", noticed.Round(time.Second))
}
