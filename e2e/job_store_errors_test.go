package e2e_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestServersThatDoNotAnswerExitUnavailable: a capture whose queue
// system's server does not answer exits 5, as docs/exit-codes.md says of
// every server, on every system, with one error line and none of the
// client library's own log lines. (A jobs table is read only through a
// mapping a second person approved, which is looked up first: without
// one it is refused before anything is dialled, exit 4.)
func TestServersThatDoNotAnswerExitUnavailable(t *testing.T) {
	t.Parallel()
	// A port that was free a moment ago: nothing listens on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	db := pgtest.New(t)
	c := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "")
	dead := fmt.Sprintf("127.0.0.1:%d", port)
	for _, tc := range []struct {
		queue string
		env   []string
	}{
		{queue: "river://river@" + dead + "/river/expiry?connect_timeout=2"},
		{queue: "bullmq://" + dead + "/0/expiry"},
		{queue: "pgboss://pgboss@" + dead + "/pgboss/expiry?connect_timeout=2"},
		{queue: "reservation-expiry.dlq", env: []string{"EXPIRYCTL_AMQP_URL=amqp://guest:guest@" + dead + "/"}},
		{queue: "sqs://reservation-expiry-dlq", env: []string{"AWS_ENDPOINT_URL_SQS=http://" + dead, "AWS_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_MAX_ATTEMPTS=1"}},
	} {
		res := (&cli{env: append(slices.Clone(c.env), tc.env...)}).run(t, "dlq", "ingest", "--queue", tc.queue)
		if res.code != 5 {
			t.Errorf("%s: %s; want exit 5", tc.queue, res)
		}
		for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
			if strings.HasPrefix(line, "redis: ") || strings.Contains(line, "level=") {
				t.Errorf("%s: a library's log line on stderr: %q", tc.queue, line)
			}
		}
	}
}

// TestQueuesThatDoNotExistExitNotFound: a capture of a queue its system
// does not hold exits 3 and names the queue, on every system whose queues
// a typo can miss, rather than capturing nothing from an empty one. (River
// and pg-boss: their incidents' typo step; a jobs table is refused first
// by its approved mapping.)
func TestQueuesThatDoNotExistExitNotFound(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "")
	q := bullmqtest.NewQueue(t)
	name := "expiryctl-e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-missing"
	for _, tc := range []struct {
		cli   *cli
		queue string
	}{
		{c, name},
		{withAWS(c), "sqs://" + name},
		{c, q.URL()},
	} {
		res := tc.cli.exits(t, 3, "dlq", "ingest", "--queue", tc.queue)
		if !strings.Contains(res.stderr, "does not exist") && !strings.Contains(res.stderr, "no such") && !strings.Contains(res.stderr, "not found") {
			t.Errorf("%s: %s; want it to say the queue does not exist", tc.queue, res)
		}
	}
}
