package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DefaultHeartbeat is the AMQP heartbeat interval expiryctl asks for when
// --amqp-heartbeat / EXPIRYCTL_AMQP_HEARTBEAT is not set. amqp091 declares
// the broker gone after one and a half intervals without a frame
// (SilenceAllowed), so a black-holed broker is noticed within 15 s.
const DefaultHeartbeat = 10 * time.Second

// SilenceAllowed is how long a connection dialled with heartbeat may hear
// nothing from the broker before it is closed as dead. amqp091 runs its
// heartbeater at half the negotiated interval and, after every frame
// read, sets the read deadline three of those ahead: one and a half
// heartbeats, not the three the AMQP specification's wording suggests.
func SilenceAllowed(heartbeat time.Duration) time.Duration { return 3 * (heartbeat / 2) }

// DialOptions are the connection settings beyond the URL.
type DialOptions struct {
	// Heartbeat is the interval proposed to the broker (which may lower
	// it); zero means DefaultHeartbeat. Both sides send a frame at least
	// that often, and a connection with nothing received for three
	// intervals is closed as dead.
	Heartbeat time.Duration
	// Properties are the client properties the broker shows for the
	// connection, such as its name and a consumer's handler-version.
	Properties amqp.Table
}

// NotAnsweringError reports that RabbitMQ stopped answering: nothing, not
// even a heartbeat, arrived on the connection for Silence. A black-holed
// network, a frozen broker or a half-open connection look like this; the
// connection is closed, and whatever was published and not yet confirmed
// is unknown (never counted as confirmed).
type NotAnsweringError struct {
	Address   string
	Silence   time.Duration
	Heartbeat time.Duration
}

func (e *NotAnsweringError) Error() string {
	return fmt.Sprintf("RabbitMQ at %s stopped answering: nothing, not even a heartbeat, for %s (one and a half heartbeats of %s; --amqp-heartbeat / EXPIRYCTL_AMQP_HEARTBEAT)",
		e.Address, e.Silence, e.Heartbeat)
}

// silences maps each connection dialled here to its watched socket, so
// that an error seen after amqp091 closed the connection (a closed channel,
// a nacked confirm) can be traced to the broker's silence. A command holds
// a handful of connections, so the entries are never reclaimed.
var silences sync.Map // *amqp.Connection → *watchedSocket

// NotAnswering returns the *NotAnsweringError that closed conn, or nil when
// conn is open or closed for another reason.
func NotAnswering(conn *amqp.Connection) error {
	v, ok := silences.Load(conn)
	if !ok {
		return nil
	}
	if err := v.(*watchedSocket).silent(); err != nil {
		return err
	}
	return nil
}

// IsNotAnswering reports whether err says RabbitMQ stopped answering.
func IsNotAnswering(err error) bool {
	var silent *NotAnsweringError
	return errors.As(err, &silent)
}

// watchedSocket records when a read ends on the read deadline amqp091 sets
// after every frame (SilenceAllowed ahead): that is the broker's silence.
type watchedSocket struct {
	net.Conn
	address   string
	heartbeat time.Duration

	mu      sync.Mutex
	silence *NotAnsweringError
}

func (s *watchedSocket) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		silent := &NotAnsweringError{Address: s.address, Silence: SilenceAllowed(s.heartbeat), Heartbeat: s.heartbeat}
		s.mu.Lock()
		s.silence = silent
		s.mu.Unlock()
		return n, silent
	}
	return n, err
}

func (s *watchedSocket) silent() *NotAnsweringError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silence
}

// dialWatched is amqp091's default dialer with the socket watched. The
// broker may lower the heartbeat in its tune; the silence reported is then
// computed from the proposed one, which is the setting the operator knows.
func dialWatched(address string, heartbeat, connectTimeout time.Duration, socket **watchedSocket) func(network, addr string) (net.Conn, error) {
	dial := amqp.DefaultDial(connectTimeout)
	return func(network, addr string) (net.Conn, error) {
		conn, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3})
		}
		*socket = &watchedSocket{Conn: conn, address: address, heartbeat: heartbeat}
		return *socket, nil
	}
}
