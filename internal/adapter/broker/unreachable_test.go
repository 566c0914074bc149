package broker_test

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

func TestUnreachable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a refused dial", &broker.ConnectError{Address: "127.0.0.1:5672", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, true},
		{"a closed connection", fmt.Errorf("open channel: %w", amqp.ErrClosed), true},
		{"a broker shutting down", &amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure", Server: true}, true},
		{"wrong credentials", &broker.ConnectError{Address: "127.0.0.1:5672", Err: amqp.ErrCredentials}, false},
		{"an unknown virtual host", &broker.ConnectError{Address: "127.0.0.1:5672", Err: amqp.ErrVhost}, false},
		{"a missing queue", fmt.Errorf("inspect queue %q: %w", "q", &amqp.Error{Code: amqp.NotFound, Server: true}), false},
		{"another error", errors.New(`queue "q" does not exist on this broker`), false},
	} {
		if got := broker.Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
