package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
		"a job store's server that refused the login": &deadletter.ServerError{Server: "River's database",
			Err: errors.New("failed SASL auth (FATAL: password authentication failed for user \"river\")")},
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

// TestInterruptedRunSaysItStillRuns: Ctrl-C on `replay run` leaves the
// request running, so the words must not read as a cancel (the on-call
// engineer would start over) and must name the command that resumes it.
func TestInterruptedRunSaysItStillRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		want, dont []string
	}{
		{"replay run", fmt.Errorf("run: %w", &replay.InterruptedError{RequestID: 5, Unconfirmed: 2, Err: context.Canceled}),
			[]string{"interrupted: replay request 5 is still running", "Nothing was lost", "`expiryctl replay run 5`", "no new approval"},
			[]string{"cancel", "stopped before finishing: context canceled"}},
		{"another command", fmt.Errorf("read letters: %w", context.Canceled), []string{"interrupted\n"}, []string{"cancel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _, errOut := testFactory(t)
			if code := reportError(f, nil, tc.err); code != ExitCancelled {
				t.Errorf("exit code %d, want %d", code, ExitCancelled)
			}
			got := errOut.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr %q should say %q", got, w)
				}
			}
			for _, d := range tc.dont {
				if strings.Contains(got, d) {
					t.Errorf("stderr %q should not say %q", got, d)
				}
			}
		})
	}
}
