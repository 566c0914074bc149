package commands

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/store"
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

// TestNoCommandDialsForHelpOrAFlagError walks the whole command tree: the
// services are built lazily, so neither --help nor a wrong flag may open a
// connection.
func TestNoCommandDialsForHelpOrAFlagError(t *testing.T) {
	t.Parallel()
	var paths [][]string
	var walk func(cmd *cobra.Command, path []string)
	walk = func(cmd *cobra.Command, path []string) {
		if !cmd.HasSubCommands() {
			paths = append(paths, path)
		}
		for _, c := range cmd.Commands() {
			walk(c, append(append([]string{}, path...), c.Name()))
		}
	}
	f, _, _ := testFactory(t)
	walk(NewCmdRoot(f), nil)
	if len(paths) < 25 {
		t.Fatalf("found %d commands, fewer than expiryctl has", len(paths))
	}
	for _, path := range paths {
		for _, extra := range [][]string{{"--help"}, {"--no-such-flag"}} {
			f, _, _ := testFactory(t)
			f.DatabaseURLFlag = "postgres://nobody:secret@127.0.0.1:1/none"
			f.AMQPURLFlag = "amqp://nobody:secret@127.0.0.1:1/"
			root := NewCmdRoot(f)
			root.SetArgs(append(append([]string{}, path...), extra...))
			err := root.Execute()
			if extra[0] == "--help" && err != nil {
				t.Errorf("%v --help: %v", path, err)
			}
			if extra[0] != "--help" && ExitCode(err) != ExitUsage {
				t.Errorf("%v %s exits %d (%v), want %d", path, extra[0], ExitCode(err), err, ExitUsage)
			}
			if f.pool != nil || f.amqpConn != nil || f.poolErr != nil || f.amqpDialled {
				t.Errorf("%v %s tried to connect", path, extra[0])
			}
		}
	}
}
