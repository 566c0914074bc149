package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"weak"

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
// a nacked confirm) can be traced to why it ended: the broker's silence,
// its close, a broken socket. The key is weak
// and the entry goes when its connection is collected: a `dlq ingest
// --follow` dials anew on every reconnect, all incident long.
var silences sync.Map // weak.Pointer[amqp.Connection] → *watchedSocket

func watchSilence(conn *amqp.Connection, socket *watchedSocket) {
	key := weak.Make(conn)
	silences.Store(key, socket)
	go socket.watchClose(conn.NotifyClose(make(chan *amqp.Error, 1)))
	runtime.AddCleanup(conn, func(key weak.Pointer[amqp.Connection]) { silences.Delete(key) }, key)
}

// Broken says why conn ended: the broker stopped answering
// (*NotAnsweringError), closed it saying why (*ClosedError), or the
// connection broke (*LostError); nil while it is open, or when it was
// closed by expiryctl itself.
func Broken(conn *amqp.Connection) error {
	if socket := socketOf(conn); socket != nil {
		return socket.broken()
	}
	return nil
}

// withBroken is err with why conn ended in front, when that is known:
// amqp091 passes on only "channel/connection is not open".
func withBroken(conn *amqp.Connection, err error) error {
	if err == nil {
		return nil
	}
	if broken := Broken(conn); broken != nil {
		return fmt.Errorf("%w (%w)", broken, err)
	}
	return err
}

func socketOf(conn *amqp.Connection) *watchedSocket {
	v, ok := silences.Load(weak.Make(conn))
	if !ok {
		return nil
	}
	return v.(*watchedSocket)
}

// silenceWatches is how many connections are watched now, for the test
// that a reconnect loop does not grow the table.
func silenceWatches() int {
	n := 0
	silences.Range(func(any, any) bool { n++; return true })
	return n
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
	// lost is the connection broken under the reader: closed by the
	// broker's side without a word, or reset.
	lost *LostError
	// closed is the connection.close the broker sent, with its reason.
	closed *amqp.Error
}

func (s *watchedSocket) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		silent := &NotAnsweringError{Address: s.address, Silence: SilenceAllowed(s.heartbeat), Heartbeat: s.heartbeat}
		s.mu.Lock()
		s.silence = silent
		s.mu.Unlock()
		return n, silent
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED):
		// amqp091 passes on only the text; the reason is kept here so
		// that the error can name the broker.
		s.mu.Lock()
		if s.lost == nil {
			s.lost = &LostError{Address: s.address, Err: err}
		}
		s.mu.Unlock()
	}
	return n, err
}

// broken is why the connection ended, in the order that explains it best:
// a silence, the broker's own close, a broken socket; nil if none is known.
func (s *watchedSocket) broken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.silence != nil:
		return s.silence
	case s.closed != nil:
		return &ClosedError{Address: s.address, Reason: s.closed}
	case s.lost != nil:
		return s.lost
	}
	return nil
}

// watchClose records the connection.close the broker sends, if it does.
func (s *watchedSocket) watchClose(closes chan *amqp.Error) {
	for e := range closes {
		if e != nil && e.Server {
			s.mu.Lock()
			s.closed = e
			s.mu.Unlock()
		}
	}
}

// LostError reports that the connection to RabbitMQ broke under expiryctl:
// the broker's side closed it without a word (a node stopped, a proxy or
// load balancer cut it) or the network reset it. What was published and
// not yet confirmed is unknown (never counted as confirmed).
type LostError struct {
	Address string
	Err     error
}

func (e *LostError) Error() string {
	why := "the connection was reset"
	if errors.Is(e.Err, io.EOF) {
		why = "the connection was closed from the broker's side"
	}
	return fmt.Sprintf("lost the connection to RabbitMQ at %s: %s (%v)", e.Address, why, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// ClosedError reports that RabbitMQ closed the connection, saying why: a
// node shutting down, an administrator closing it, a resource alarm.
type ClosedError struct {
	Address string
	Reason  *amqp.Error
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("RabbitMQ at %s closed the connection: %s", e.Address, e.Reason.Reason)
}

func (e *ClosedError) Unwrap() error { return e.Reason }

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
