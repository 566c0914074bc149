package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/reconcile"
	"github.com/expiryctl/expiryctl/release"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// Exit codes, documented in docs/exit-codes.md. Scripts may rely on them.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitRefused     = 4
	ExitUnavailable = 5
	ExitSchema      = 6
	ExitTampered    = 7
	ExitHalted      = 8
	ExitCancelled   = 130
)

// FlagError is a wrong or missing flag or argument. It exits with ExitUsage
// and the command's usage line.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// flagErrorf builds a FlagError.
func flagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var (
		flagErr     *FlagError
		pgConnErr   *store.ConnectError
		amqpConnErr *broker.ConnectError
		outdated    *store.SchemaOutdatedError
		refusal     *replay.Refusal
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &flagErr), errors.As(err, new(*audit.VerifierKeyError)), errors.As(err, new(*dsn.InvalidError)):
		return ExitUsage
	case errors.Is(err, context.Canceled):
		return ExitCancelled
	case errors.As(err, &pgConnErr), errors.As(err, &amqpConnErr), store.ServerGone(err), broker.IsNotAnswering(err),
		// A connection lost mid-command (a broker restarting, a node of a
		// cluster stopping) is the server being unavailable too.
		errors.As(err, new(*replay.BrokerLostError)), errors.Is(err, deadletter.ErrSourceLost),
		errors.As(err, new(*deadletter.ServerError)):
		return ExitUnavailable
	case errors.Is(err, store.ErrSchemaMissing), errors.As(err, &outdated):
		return ExitSchema
	case errors.As(err, new(*replay.HaltError)):
		return ExitHalted
	case errors.As(err, new(*audit.ChainError)), errors.As(err, new(*reconcile.MismatchError)),
		errors.As(err, new(*release.MismatchError)):
		return ExitTampered
	case errors.As(err, &refusal):
		return ExitRefused
	case errors.Is(err, deadletter.ErrNotFound), errors.Is(err, deadletter.ErrQueueNotFound):
		return ExitNotFound
	default:
		return ExitError
	}
}
