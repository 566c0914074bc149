package commands

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// TestLostConnectionsExitUnavailable: a connection lost in the middle of a
// command (a broker restarting under a replay, a DLQ consumer closed under
// a capture) exits 5, as a connection that failed at the start does, so a
// script can tell "try again when the server is back" from a failure.
func TestLostConnectionsExitUnavailable(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"a replay losing its publishing channel": &replay.InterruptedError{RequestID: 7,
			Err: &replay.BrokerLostError{Err: amqp.ErrClosed}},
		"a capture losing its consumer": fmt.Errorf("%w; letters not yet stored stay in the queue", deadletter.ErrSourceLost),
		"a batch whose PostgreSQL connection was reset": &deadletter.StoreError{Letters: 20,
			Err: &store.LostError{Address: "db:5432/archive", Err: syscall.ECONNRESET}},
		"a replay whose PostgreSQL connection was closed": &replay.InterruptedError{RequestID: 7,
			Err: &store.LostError{Address: "db:5432/archive", Err: io.EOF}},
		"a replay whose PostgreSQL server restarted": &replay.InterruptedError{RequestID: 7,
			Err: fmt.Errorf("record the confirms: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01",
				Message: "terminating connection due to administrator command"})},
	} {
		if code := ExitCode(err); code != ExitUnavailable {
			t.Errorf("%s: exit %d, want %d", name, code, ExitUnavailable)
		}
	}
	if code := ExitCode(errors.New("exchange \"x\" routing key \"k\": returned unroutable")); code != ExitError {
		t.Errorf("an ordinary failure: exit %d, want %d", code, ExitError)
	}
}
