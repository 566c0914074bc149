// Package amqptest connects tests to a real RabbitMQ and gives them queue and
// exchange names of their own, so tests run in parallel and against the same
// broker as other test binaries without seeing each other's messages.
//
// The broker comes from EXPIRYCTL_TEST_AMQP_URL (default: the local broker
// that scripts/services.sh starts). A broker that cannot be reached fails the
// test with how to start it; it never skips, because a skipped broker test
// reads as a passing one.
package amqptest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/dsn"
)

// URL is the broker tests connect to: EXPIRYCTL_TEST_AMQP_URL, or the local
// broker as guest.
func URL() string {
	if u := os.Getenv("EXPIRYCTL_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Dial connects to URL and closes the connection when tb ends. An unreachable
// broker fails tb with how to start one.
func Dial(tb testing.TB) *amqp.Connection {
	tb.Helper()
	conn, err := dial()
	if err != nil {
		tb.Fatalf("amqptest: RabbitMQ is required for this test and is not reachable at %s (%v).\n"+
			"Start it with scripts/services.sh, or set EXPIRYCTL_TEST_AMQP_URL.", dsn.Redact(URL()), dsn.RedactText(err.Error()))
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Name returns a broker object name unique to this test run: the test's
// name, a random part, then suffix. Names stay well under RabbitMQ's 255-byte
// limit even for deeply nested subtests.
func Name(tb testing.TB, suffix string) string {
	tb.Helper()
	var b strings.Builder
	for _, r := range tb.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 80 {
		name = name[:80]
	}
	random := make([]byte, 4)
	_, _ = rand.Read(random)
	return "test." + name + "." + hex.EncodeToString(random) + suffix
}

// DeleteOnCleanup deletes the named queues and exchanges when tb ends, on a
// connection of its own so that it works even after the test closed or broke
// its own connection. Missing objects are ignored.
func DeleteOnCleanup(tb testing.TB, queues, exchanges []string) {
	tb.Helper()
	tb.Cleanup(func() {
		conn, err := dial()
		if err != nil {
			tb.Errorf("amqptest: cleanup: %v", err)
			return
		}
		defer conn.Close()
		for _, q := range queues {
			// A channel exception closes the channel, so each delete gets one.
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(q, false, false, false)
				_ = ch.Close()
			}
		}
		for _, x := range exchanges {
			if ch, err := conn.Channel(); err == nil {
				_ = ch.ExchangeDelete(x, false, false)
				_ = ch.Close()
			}
		}
	})
}

func dial() (*amqp.Connection, error) {
	return amqp.DialConfig(URL(), amqp.Config{
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		Dial:      amqp.DefaultDial(5 * time.Second),
	})
}
