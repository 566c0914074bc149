package broker

import (
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/dsn"
)

// DefaultURL is the broker expiryctl reaches when neither --amqp-url nor
// EXPIRYCTL_AMQP_URL is set.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// Dial connects to the broker at url with a bounded connection timeout and
// the default heartbeat.
func Dial(url string) (*amqp.Connection, error) {
	return DialWith(url, DialOptions{Properties: amqp.Table{"connection_name": "expiryctl"}})
}

// DialWithProperties is Dial with the connection properties the broker
// shows for the connection, such as a consumer's handler-version.
func DialWithProperties(url string, properties amqp.Table) (*amqp.Connection, error) {
	return DialWith(url, DialOptions{Properties: properties})
}

// DialWith is Dial with opts. A connection that then hears nothing from the
// broker for SilenceAllowed (one and a half heartbeats) is closed, and
// NotAnswering says why.
func DialWith(url string, opts DialOptions) (*amqp.Connection, error) {
	heartbeat := opts.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	properties := opts.Properties
	if properties == nil {
		properties = amqp.Table{"connection_name": "expiryctl"}
	}
	var socket *watchedSocket
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  heartbeat,
		Locale:     "en_US",
		Properties: properties,
		Dial:       dialWatched(dsn.Address(url), heartbeat, 5*time.Second, &socket),
	})
	if err != nil {
		if isURIError(url) {
			return nil, dsn.Invalid("AMQP", url, err, "amqp://USER@HOST:5672/VHOST (amqps:// with TLS)")
		}
		var frameErr *amqp.Error
		if socket != nil && socket.broken() != nil && errors.As(err, &frameErr) && frameErr.Code == amqp.FrameError {
			// Cut during the handshake: amqp091 reports it as a frame
			// error, which would read as the broker's refusal.
			err = socket.broken()
		}
		return nil, &ConnectError{Address: dsn.Address(url), User: amqpUser(url), Err: err,
			UsualPortAnswers: usualPortAnswering(url, err), cause: dsn.RedactTextFor(err.Error(), url)}
	}
	if socket != nil {
		watchSilence(conn, socket)
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
