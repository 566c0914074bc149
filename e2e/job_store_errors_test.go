package e2e_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestJobStoreServersThatDoNotAnswerExitUnavailable: a capture whose job
// store's server does not answer exits 5, as docs/exit-codes.md says of
// every server, with one error line and none of the client library's
// own log lines.
func TestJobStoreServersThatDoNotAnswerExitUnavailable(t *testing.T) {
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
	for _, queue := range []string{
		fmt.Sprintf("river://river@127.0.0.1:%d/river/expiry?connect_timeout=2", port),
		fmt.Sprintf("bullmq://127.0.0.1:%d/0/expiry", port),
	} {
		res := c.run(t, "dlq", "ingest", "--queue", queue)
		if res.code != 5 {
			t.Errorf("%s: %s; want exit 5", queue, res)
		}
		for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
			if strings.HasPrefix(line, "redis: ") || strings.Contains(line, "level=") {
				t.Errorf("%s: a library's log line on stderr: %q", queue, line)
			}
		}
	}
}
