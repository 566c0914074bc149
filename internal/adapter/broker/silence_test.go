package broker_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// freezer forwards one TCP connection to upstream until frozen, and then
// passes nothing either way while keeping both sockets open: a broker
// frozen (SIGSTOP, a VM paused) or a path that silently drops everything.
type freezer struct {
	ln     net.Listener
	frozen chan struct{}
	once   sync.Once
}

func newFreezer(t *testing.T, upstream string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, frozen: make(chan struct{})}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		f.freeze()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			go f.pipe(server, client)
			go f.pipe(client, server)
		}
	}()
	return f
}

// pipe copies from src to dst until frozen; what it read meanwhile is
// held, never delivered.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			<-make(chan struct{}) // held for good; the cleanup closes the sockets
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

// TestNotAnsweringSaysTheSilenceThatWas freezes the path to the broker under
// a connection with a 2s heartbeat: the connection is given up after the
// silence the error then reports, not sooner or much later. (amqp091
// runs its heartbeater at half the negotiated interval and gives up three
// of those without a frame: one and a half heartbeats, not three.)
func TestNotAnsweringSaysTheSilenceThatWas(t *testing.T) {
	t.Parallel()
	amqptest.Dial(t) // a clear failure when the broker is not running
	u, err := url.Parse(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	f := newFreezer(t, u.Host)
	u.Host = f.ln.Addr().String()
	const heartbeat = 2 * time.Second
	conn, err := broker.DialWith(u.String(), broker.DialOptions{Heartbeat: heartbeat})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	// A frame just before the freeze, so that the silence starts with it.
	if _, err := conn.Channel(); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	frozen := time.Now()
	select {
	case closeErr := <-closed:
		if closeErr == nil {
			t.Fatal("the connection was closed cleanly, not given up")
		}
	case <-time.After(10 * heartbeat):
		t.Fatalf("the connection was not given up %s into the silence", 10*heartbeat)
	}
	took := time.Since(frozen)
	var silent *broker.NotAnsweringError
	if err := broker.Broken(conn); !errors.As(err, &silent) {
		t.Fatalf("Broken = %v, want a *NotAnsweringError", err)
	}
	if took < silent.Silence-500*time.Millisecond || took > silent.Silence+time.Second {
		t.Errorf("given up %s into the silence, but the error says %s: %v", took.Round(10*time.Millisecond), silent.Silence, silent)
	}
	if silent.Silence != broker.SilenceAllowed(heartbeat) {
		t.Errorf("the error says %s, SilenceAllowed(%s) %s", silent.Silence, heartbeat, broker.SilenceAllowed(heartbeat))
	}
}
