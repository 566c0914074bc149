package broker

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/dsn"
)

// ConnectError reports that a connection to RabbitMQ failed. Its message
// names the address (never the password), what failed (the broker is
// unreachable, refused the credentials or the virtual host, or TLS failed)
// and the next step for that failure.
type ConnectError struct {
	Address string
	// User is the login the connection was for, when known.
	User string
	Err  error
	// UsualPortAnswers is the address on the same host and the scheme's
	// usual port (5672, or 5671 for amqps) where a server answered when
	// the address asked for refused the connection: the port is likely
	// mistyped. Empty when not probed, or when nothing answered there.
	UsualPortAnswers string
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
	what, next := e.diagnosis()
	return fmt.Sprintf("%s at %s: %s\n%s", what, e.Address, cause, next)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// diagnosis says what failed and what to do about it. A development hint
// (start the local broker) is given only where it could not be reached.
func (e *ConnectError) diagnosis() (what, next string) {
	user := "your user"
	if e.User != "" {
		user = fmt.Sprintf("user %q", e.User)
	}
	var lost *LostError
	if errors.As(e.Err, &lost) {
		return "RabbitMQ cut the connection during the handshake",
			"the broker may be starting or stopping, or a proxy or load balancer in between cut it: try again in a moment; the broker's log says more"
	}
	var amqpErr *amqp.Error
	if errors.As(e.Err, &amqpErr) {
		switch amqpErr.Code {
		case amqp.AccessRefused:
			return "RabbitMQ refused the credentials",
				fmt.Sprintf("check the user and password for %s in --amqp-url / EXPIRYCTL_AMQP_URL; a RabbitMQ administrator creates a user with `rabbitmqctl add_user` and `rabbitmqctl set_permissions`", user)
		case amqp.NotAllowed:
			return "RabbitMQ refused the virtual host",
				fmt.Sprintf("the virtual host in --amqp-url / EXPIRYCTL_AMQP_URL does not exist or %s may not use it: a RabbitMQ administrator grants it with `rabbitmqctl set_permissions -p VHOST USER '.*' '.*' '.*'`", user)
		case amqp.ConnectionForced:
			return "RabbitMQ closed the connection",
				"the broker is shutting down or an administrator closed the connection: try again in a moment"
		}
		return "RabbitMQ refused the connection",
			"check --amqp-url / EXPIRYCTL_AMQP_URL; the broker's log says more"
	}
	if isTLSFailure(e.Err) {
		return "TLS with RabbitMQ failed",
			"check that the port speaks TLS (amqps:// usually needs 5671, not 5672), the URL's host and the CA the system trusts: the broker's certificate must match the host"
	}
	var dnsErr *net.DNSError
	if errors.As(e.Err, &dnsErr) && dnsErr.IsNotFound {
		return "cannot reach RabbitMQ",
			"the host name does not resolve: check the host in --amqp-url / EXPIRYCTL_AMQP_URL"
	}
	if e.UsualPortAnswers != "" {
		return "cannot reach RabbitMQ",
			"nothing listens on that port, but a server answers at " + e.UsualPortAnswers + ", RabbitMQ's usual port: check the port in --amqp-url / EXPIRYCTL_AMQP_URL"
	}
	return "cannot reach RabbitMQ",
		"check the host and port in --amqp-url / EXPIRYCTL_AMQP_URL and that the broker runs and listens there; " +
			"on a development machine start it with `scripts/services.sh` (or `rabbitmq-server -detached`)"
}

// usualPortAnswering is the URL's host at its scheme's usual port when err
// is a refused connection on another port and a server accepts a
// connection there within a moment; otherwise "".
func usualPortAnswering(url string, err error) string {
	uri, parseErr := amqp.ParseURI(url)
	if parseErr != nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	usual := 5672
	if uri.Scheme == "amqps" {
		usual = 5671
	}
	if uri.Port == usual {
		return ""
	}
	addr := net.JoinHostPort(uri.Host, strconv.Itoa(usual))
	conn, dialErr := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if dialErr != nil {
		return ""
	}
	_ = conn.Close()
	return addr
}

// isTLSFailure says whether err is a TLS handshake or certificate failure.
func isTLSFailure(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "x509: ")
}

// amqpUser is the user an AMQP URL names, or "" when it cannot be read.
func amqpUser(url string) string {
	uri, err := amqp.ParseURI(url)
	if err != nil {
		return ""
	}
	return uri.Username
}
