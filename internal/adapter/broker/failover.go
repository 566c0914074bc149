package broker

import (
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// SplitURLs reads the AMQP URLs of a cluster's nodes from a comma-separated
// list (--amqp-url a,b or EXPIRYCTL_AMQP_URL=a,b), dropping blanks. A URL
// cannot hold a raw comma: a password with one spells it %2C.
func SplitURLs(list string) []string {
	var urls []string
	for part := range strings.SplitSeq(list, ",") {
		if part = strings.TrimSpace(part); part != "" {
			urls = append(urls, part)
		}
	}
	return urls
}

// DialAny connects to the first of urls that accepts, trying them in order
// from urls[start] round to urls[start-1], so that a caller whose node was
// lost goes on to the next one rather than back to the node that just
// went. It returns the connection and the index of the URL it reached.
// When every node refuses, the error says why for each, and is Unreachable
// if any of them was merely not there: another try may find it back.
func DialAny(urls []string, start int, opts DialOptions) (*amqp.Connection, int, error) {
	if len(urls) == 0 {
		urls = []string{DefaultURL}
	}
	start = ((start % len(urls)) + len(urls)) % len(urls)
	var failures []error
	for k := range urls {
		i := (start + k) % len(urls)
		conn, err := DialWith(urls[i], opts)
		if err == nil {
			return conn, i, nil
		}
		var connectErr *ConnectError
		if !errors.As(err, &connectErr) {
			// An unreadable URL is the user's to fix, not a node to skip.
			return nil, i, err
		}
		failures = append(failures, err)
	}
	if len(failures) == 1 {
		return nil, start, failures[0]
	}
	return nil, start, &ClusterError{Failures: failures}
}

// ClusterError is every node of a list refusing a connection.
type ClusterError struct {
	// Failures are each node's *ConnectError, in the order tried.
	Failures []error
}

func (e *ClusterError) Error() string {
	lines := make([]string, 0, len(e.Failures)+1)
	lines = append(lines, "no RabbitMQ node of --amqp-url / EXPIRYCTL_AMQP_URL accepted a connection:")
	for _, err := range e.Failures {
		first, _, _ := strings.Cut(err.Error(), "\n")
		lines = append(lines, "  "+first)
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives the nodes' errors to errors.As and errors.Is, so that
// Unreachable sees a ConnectError.
func (e *ClusterError) Unwrap() []error { return e.Failures }
