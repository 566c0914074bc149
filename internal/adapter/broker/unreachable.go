package broker

import (
	"errors"
	"net"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Unreachable reports whether err says the broker is not there just now (a
// refused, reset or closed connection, a broker shutting down), as during
// its restart, rather than that it refused what was asked: wrong
// credentials, an unknown virtual host or a missing queue are not waited
// out.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost) {
		return false
	}
	var connectErr *ConnectError
	var amqpErr *amqp.Error
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.Is(err, amqp.ErrClosed), errors.As(err, &netErr):
		return true
	case errors.As(err, &amqpErr):
		// A broker that stops closes its connections with 320
		// CONNECTION_FORCED; a channel-level refusal is not recoverable by
		// waiting.
		return amqpErr.Code == amqp.ConnectionForced || !amqpErr.Server
	}
	return false
}
