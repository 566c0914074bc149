package broker

import (
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/dsn"
)

// DefaultURL is the broker expiryctl reaches when neither --amqp-url nor
// EXPIRYCTL_AMQP_URL is set.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// ConnectError reports that RabbitMQ could not be reached. Its message names
// the address (never the password) and how to start a local broker.
type ConnectError struct {
	Address string
	Err     error
	// cause is Err's message with the URL's password scrubbed, set by Dial,
	// which knows the URL. It is kept instead of the secrets themselves so
	// that printing the struct cannot show them.
	cause string
}

func (e *ConnectError) Error() string {
	cause := e.cause
	if cause == "" {
		cause = dsn.RedactText(e.Err.Error())
	}
	return fmt.Sprintf("cannot reach RabbitMQ at %s: %s\n"+
		"start it with `scripts/services.sh` (or `rabbitmq-server -detached`), "+
		"or point --amqp-url / EXPIRYCTL_AMQP_URL at a running broker",
		e.Address, cause)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Dial connects to the broker at url with a bounded connection timeout.
func Dial(url string) (*amqp.Connection, error) {
	return DialWithProperties(url, amqp.Table{"connection_name": "expiryctl"})
}

// DialWithProperties is Dial with the connection properties the broker
// shows for the connection, such as a consumer's handler-version.
func DialWithProperties(url string, properties amqp.Table) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: properties,
		Dial:       amqp.DefaultDial(5 * time.Second),
	})
	if err != nil {
		if isURIError(url) {
			return nil, fmt.Errorf("invalid AMQP URL %s: %s", dsn.Redact(url), dsn.RedactTextFor(err.Error(), url))
		}
		return nil, &ConnectError{Address: dsn.Address(url), Err: err, cause: dsn.RedactTextFor(err.Error(), url)}
	}
	return conn, nil
}

func isURIError(url string) bool {
	_, err := amqp.ParseURI(url)
	return err != nil
}

// IsNotFound reports whether err is the broker's 404 NOT_FOUND channel
// exception, raised for instance by a passive declare of a missing queue.
func IsNotFound(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound
}
