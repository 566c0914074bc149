package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

func TestSplitURLs(t *testing.T) {
	t.Parallel()
	got := broker.SplitURLs(" amqp://a:1/ ,, amqp://u:p%2Cw@b:2/,amqp://c:3/ ")
	want := []string{"amqp://a:1/", "amqp://u:p%2Cw@b:2/", "amqp://c:3/"}
	if !slices.Equal(got, want) {
		t.Errorf("SplitURLs = %q, want %q", got, want)
	}
	if got := broker.SplitURLs(""); len(got) != 0 {
		t.Errorf("SplitURLs(\"\") = %q, want none", got)
	}
}

// TestDialAnyFailsOver lists a node that is not there (nothing listens on
// port 1) before and after the real broker: the dial reaches the broker
// from either start, and says which URL it reached.
func TestDialAnyFailsOver(t *testing.T) {
	t.Parallel()
	_ = amqptest.Dial(t).Close() // the real broker is there
	down := "amqp://guest:S3cretPW@127.0.0.1:1/"
	urls := []string{down, amqptest.URL(), down}
	for start, wantNode := range map[int]int{0: 1, 1: 1, 2: 1, 5: 1} {
		conn, node, err := broker.DialAny(urls, start, broker.DialOptions{})
		if err != nil {
			t.Fatalf("DialAny from %d: %v", start, err)
		}
		_ = conn.Close()
		if node != wantNode {
			t.Errorf("DialAny from %d reached node %d, want %d", start, node, wantNode)
		}
	}
}

// TestDialAnyNamesEveryNode: when no node accepts, the error names each
// node's address, shows no password, and is one to wait out.
func TestDialAnyNamesEveryNode(t *testing.T) {
	t.Parallel()
	urls := []string{"amqp://guest:S3cretPW@127.0.0.1:1/", "amqp://guest:S3cretPW@127.0.0.2:1/"}
	_, _, err := broker.DialAny(urls, 1, broker.DialOptions{})
	if err == nil {
		t.Fatal("DialAny reached a node where none listens")
	}
	msg := err.Error()
	for _, want := range []string{"no RabbitMQ node", "127.0.0.1:1", "127.0.0.2:1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %s", want, msg)
		}
	}
	if strings.Index(msg, "127.0.0.2:1") > strings.Index(msg, "127.0.0.1:1") {
		t.Errorf("the nodes should be tried from the start, the second first: %s", msg)
	}
	if strings.Contains(msg, "S3cretPW") {
		t.Errorf("the error shows a password: %s", msg)
	}
	var connectErr *broker.ConnectError
	if !errors.As(err, &connectErr) || !broker.Unreachable(err) {
		t.Errorf("a cluster none of whose nodes is there should be unreachable, a ConnectError: %#v", err)
	}
}

// TestDialAnyStopsAtAnInvalidURL: an unreadable URL is not skipped as a
// node that is down, since no wait cures it.
func TestDialAnyStopsAtAnInvalidURL(t *testing.T) {
	t.Parallel()
	_, _, err := broker.DialAny([]string{"amqp://u:S3cret PW@127.0.0.1:1/", amqptest.URL()}, 0, broker.DialOptions{})
	if err == nil || !strings.Contains(err.Error(), "invalid AMQP URL") || broker.Unreachable(err) {
		t.Errorf("want the invalid URL reported, not waited out: %v", err)
	}
}
