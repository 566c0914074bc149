package store

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchedConnNamesTheSilence reads from a peer that never writes: the
// read ends after the silence allowed with a *NotAnsweringError, while a
// deadline the driver set itself, sooner, ends it with the plain deadline
// error the driver expects for its own cancellation.
func TestWatchedConnNamesTheSilence(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := &watchedConn{Conn: client, silence: 100 * time.Millisecond, found: &silenceFound{}, address: "db:5432/x"}

	start := time.Now()
	_, err := c.Read(make([]byte, 1))
	var silent *NotAnsweringError
	if !errors.As(err, &silent) || silent.Address != "db:5432/x" {
		t.Fatalf("a silent peer: %v, want a NotAnsweringError naming the server", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 2*time.Second {
		t.Errorf("the silence was noticed after %s, want about 100ms", took)
	}

	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	if errors.As(err, &silent) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the driver's own deadline: %v, want the plain deadline error", err)
	}

	// Data that arrives in time is read as usual.
	_ = c.SetReadDeadline(time.Time{})
	go func() { _, _ = server.Write([]byte("Z")) }()
	if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Errorf("a peer that answers: %d bytes, %v", n, err)
	}
}

// TestASilenceFoundShortensTheOthers: once one connection of a pool found
// the server silent, another gives it only the grace to answer, so that a
// command ending on a black hole does not wait the whole silence again for
// each statement that records its failure; an answer on any of them ends
// that.
func TestASilenceFoundShortensTheOthers(t *testing.T) {
	t.Parallel()
	const silence = 2500 * time.Millisecond
	found := &silenceFound{}
	silentPeer := func() *watchedConn {
		client, server := net.Pipe()
		t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
		return &watchedConn{Conn: client, silence: silence, found: found, address: "db:5432/x"}
	}
	took := func(c *watchedConn) time.Duration {
		start := time.Now()
		_, err := c.Read(make([]byte, 1))
		if !IsNotAnswering(err) {
			t.Fatalf("a silent peer: %v, want a NotAnsweringError", err)
		}
		return time.Since(start)
	}
	if d := took(silentPeer()); d < silence {
		t.Fatalf("the first silence was declared after %s, want the whole %s", d, silence)
	}
	if d := took(silentPeer()); d < clientGrace || d > silence-500*time.Millisecond {
		t.Fatalf("after a silence was found, another connection waited %s, want about %s", d, clientGrace)
	}

	client, server := net.Pipe()
	defer server.Close()
	answering := &watchedConn{Conn: client, silence: silence, found: found, address: "db:5432/x"}
	go func() { _, _ = server.Write([]byte("Z")) }()
	if _, err := answering.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if got := found.allowed(silence); got != silence {
		t.Fatalf("after the server answered again, a read is allowed %s of silence, want the whole %s", got, silence)
	}
}

// TestWatchedConnNamesALostConnection: a server that closes the connection
// while a reply is due, or a network that resets it, is named with its
// address, and the cause stays visible to errors.Is.
func TestWatchedConnNamesALostConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if server, err := ln.Accept(); err == nil {
			_ = server.Close()
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := &watchedConn{Conn: client, silence: time.Minute, found: &silenceFound{}, address: "db:5432/x"}
	_, err = c.Read(make([]byte, 1))
	if !IsLost(err) || !errors.Is(err, io.EOF) {
		t.Fatalf("a closed peer: %v, want a LostError wrapping EOF", err)
	}
	if want := "lost the connection to PostgreSQL at db:5432/x: the server closed the connection"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start %q", err, want)
	}
	reset := c.lost(syscall.ECONNRESET)
	if !IsLost(reset) || !strings.Contains(reset.Error(), "the connection was reset") {
		t.Errorf("a reset: %v, want a LostError saying it was reset", reset)
	}
	if other := c.lost(net.ErrClosed); IsLost(other) {
		t.Errorf("our own close is not a lost server: %v", other)
	}
}
