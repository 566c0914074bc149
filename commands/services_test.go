package commands

import (
	"context"
	"errors"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// The unit tests of the run functions build a command with NewCmdX and a
// runF that puts fakes (internal/fixture/fakes) in the options before
// calling the real xRun, so that argv, options and output are tested
// together without a server.

// serve is a service constructor that hands out svc, as a Factory method
// does once connected.
func serve[T any](svc T) func(context.Context) (T, error) {
	return func(context.Context) (T, error) { return svc, nil }
}

// unreachable is a service constructor failing as the Factory's does when
// PostgreSQL is down.
func unreachable[T any]() func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		var zero T
		return zero, &store.ConnectError{Address: "127.0.0.1:1", Err: errors.New("connection refused")}
	}
}

// never is a service constructor that fails the test when a command asks
// for it.
func never[T any](t *testing.T, what string) func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		t.Helper()
		t.Errorf("the command asked for %s, which it must not need here", what)
		var zero T
		return zero, errors.New(what + " must not be used")
	}
}

// wantExit fails t unless err maps to exit code want.
func wantExit(t *testing.T, err error, want int) {
	t.Helper()
	if got := ExitCode(err); got != want {
		t.Fatalf("error %v exits %d, want %d", err, got, want)
	}
}
