package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTimeout is how long expiryctl waits for PostgreSQL to answer when
// --db-timeout / EXPIRYCTL_DB_TIMEOUT is not set. It bounds one statement
// on the server (statement_timeout, lock_timeout) and the silence of the
// connection on the client: long enough for any statement expiryctl runs
// on a healthy server, short enough that a black-holed server is noticed
// while the operator still watches.
const DefaultTimeout = 30 * time.Second

// clientGrace is how much longer than the server's own statement_timeout
// the client waits for an answer: a live server that is merely slow says
// "canceling statement due to statement timeout" itself, which is the more
// precise message; only a server that says nothing at all is declared
// silent.
const clientGrace = time.Second

// Options are the connection settings beyond the URL.
type Options struct {
	// Timeout bounds a statement on the server (statement_timeout and
	// lock_timeout) and how long the client waits for any answer on a
	// connection that expects one (plus a second of grace). Zero turns all
	// three off, as PostgreSQL's own 0 does.
	Timeout time.Duration
	// ServerTimeouts applies Timeout as statement_timeout and lock_timeout
	// too. Off for `migrate`, whose statements on a large archive may
	// legitimately run long; the client's wait for an answer still applies.
	ServerTimeouts bool
	// Setting names where the URL came from, for the advice of a failed
	// connection (default "--database-url / EXPIRYCTL_DATABASE_URL").
	Setting string
	// Build names the client's build ("v1.2.0 (commit …)") to every
	// session of the pool, as the setting expiryctl.build, which the
	// schema's functions record in each audit row the session writes
	// (store/functions/audit_build.sql). Empty sets nothing. It travels in
	// the startup packet, as statement_timeout does: no extra round trip.
	Build string
}

// NotAnsweringError reports that a PostgreSQL server stopped answering: a
// connection that expected a reply got nothing for Silence. It is what a
// black-holed network, a frozen server or a half-open connection look like
// from the client; the connection is closed and the statement's outcome is
// unknown (a COMMIT may or may not have landed).
type NotAnsweringError struct {
	Address string
	Silence time.Duration
}

func (e *NotAnsweringError) Error() string {
	return fmt.Sprintf("PostgreSQL at %s stopped answering: nothing for %s on a connection waiting for a reply (--db-timeout / EXPIRYCTL_DB_TIMEOUT)",
		e.Address, e.Silence)
}

// LostError reports that the connection to a PostgreSQL server broke: the
// server closed it (a restart, a failover, an administrator ending the
// session) or the network reset it (a proxy, a firewall, a load balancer).
// A statement in flight has an unknown outcome, as with a silence.
type LostError struct {
	Address string
	Err     error
}

func (e *LostError) Error() string {
	why := "the connection was reset"
	if errors.Is(e.Err, io.EOF) {
		why = "the server closed the connection"
	}
	return fmt.Sprintf("lost the connection to PostgreSQL at %s: %s (%v)", e.Address, why, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// IsLost reports whether err says a connection to PostgreSQL broke.
func IsLost(err error) bool {
	var lost *LostError
	return errors.As(err, &lost)
}

// IsNotAnswering reports whether err says a server stopped answering.
func IsNotAnswering(err error) bool {
	var silent *NotAnsweringError
	return errors.As(err, &silent)
}

// applyOptions sets the server-side timeouts, TCP keepalives and the
// client's watch for silence on cfg.
func applyOptions(cfg *pgxpool.Config, opts Options) {
	if opts.Timeout <= 0 {
		return
	}
	if opts.ServerTimeouts {
		ms := strconv.FormatInt(opts.Timeout.Milliseconds(), 10)
		// A URL's own options win: an operator who tuned them knows better.
		for _, p := range []string{"statement_timeout", "lock_timeout"} {
			if _, set := cfg.ConnConfig.RuntimeParams[p]; !set {
				cfg.ConnConfig.RuntimeParams[p] = ms
			}
		}
	}
	silence := opts.Timeout + clientGrace
	database := cfg.ConnConfig.Database
	found := &silenceFound{}
	dialer := &net.Dialer{
		Timeout: cfg.ConnConfig.ConnectTimeout,
		// Keepalives find a peer that vanished while the connection was
		// idle in the pool; the watch for silence finds one that vanished
		// while a reply was due.
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3},
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The host dialed, not the URL's first: with a multi-host URL the
		// server that stopped answering is the one this connection reached.
		return &watchedConn{Conn: conn, silence: silence, found: found, address: addr + "/" + database}, nil
	}
}

// watchedConn is a connection whose every read and write must make
// progress within silence. pgx reads only when it expects something (a
// reply, or a non-blocking liveness check with a deadline of its own), so
// an idle pooled connection is never cut; a deadline pgx sets itself (to
// cancel a statement on its context) is kept when it comes sooner.
type watchedConn struct {
	net.Conn
	silence time.Duration
	found   *silenceFound
	address string

	mu sync.Mutex
	// readDeadline and writeDeadline are the deadlines pgx asked for; zero
	// means none.
	readDeadline, writeDeadline time.Time
	// reading and writing are the deadlines armed for the read and write in
	// progress; zero when none is.
	reading, writing time.Time
}

func sooner(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (c *watchedConn) Read(p []byte) (int, error) {
	silence := c.found.allowed(c.silence)
	c.mu.Lock()
	armed := time.Now().Add(silence)
	c.reading = armed
	deadline := sooner(c.readDeadline, armed)
	err := c.Conn.SetReadDeadline(deadline)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reading = time.Time{}
	ours := c.readDeadline.IsZero() || armed.Before(c.readDeadline)
	c.mu.Unlock()
	if n > 0 {
		c.found.answered()
	}
	if err != nil && ours && errors.Is(err, os.ErrDeadlineExceeded) {
		c.found.silent()
		return n, &NotAnsweringError{Address: c.address, Silence: silence}
	}
	return n, c.lost(err)
}

func (c *watchedConn) Write(p []byte) (int, error) {
	silence := c.found.allowed(c.silence)
	c.mu.Lock()
	armed := time.Now().Add(silence)
	c.writing = armed
	err := c.Conn.SetWriteDeadline(sooner(c.writeDeadline, armed))
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.writing = time.Time{}
	ours := c.writeDeadline.IsZero() || armed.Before(c.writeDeadline)
	c.mu.Unlock()
	if err != nil && ours && errors.Is(err, os.ErrDeadlineExceeded) {
		c.found.silent()
		return n, &NotAnsweringError{Address: c.address, Silence: silence}
	}
	return n, c.lost(err)
}

// lost names the server in err when err says the connection broke: the
// server closed it or the network reset it.
func (c *watchedConn) lost(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return &LostError{Address: c.address, Err: err}
	}
	return err
}

func (c *watchedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline records pgx's deadline and applies it at once, so that a
// read in progress is interrupted when pgx cancels it; the read keeps its
// own armed deadline when that comes sooner.
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDeadline = t
	return c.Conn.SetReadDeadline(sooner(t, c.reading))
}

// SetWriteDeadline is SetReadDeadline for writes.
func (c *watchedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = t
	return c.Conn.SetWriteDeadline(sooner(t, c.writing))
}

// silenceFound is shared by the connections of one pool: once one of them
// found the server silent, the others, and the connections dialled after,
// give it only clientGrace to answer, until any of them hears from it
// again. Without it, a command that ends on a black hole would wait the
// whole silence again for each statement in flight on other connections
// and for each row that records its failure, several times the
// --db-timeout in all.
type silenceFound struct{ found atomic.Bool }

func (f *silenceFound) allowed(silence time.Duration) time.Duration {
	if f.found.Load() {
		return min(silence, clientGrace)
	}
	return silence
}

func (f *silenceFound) silent() { f.found.Store(true) }

func (f *silenceFound) answered() { f.found.Store(false) }
