package commands

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
)

// testFactory returns a Factory whose streams are buffers and whose
// connections fail if a test ever reaches them.
func testFactory(t *testing.T) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	f := &Factory{
		IO:     &IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut},
		Now:    func() time.Time { return time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC) },
		Getenv: func(string) string { return "" },
	}
	return f, out, errOut
}

func TestDLQListFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *DLQListOptions)
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, o *DLQListOptions) {
			if o.Limit != 50 || o.Output.value != "table" || len(o.Filter.Categories) != 0 {
				t.Errorf("defaults = %+v", o)
			}
		}},
		{name: "reasons repeat", args: []string{"--reason", "validation", "-r", "conflict", "--status", "dead"}, check: func(t *testing.T, o *DLQListOptions) {
			if len(o.Filter.Categories) != 2 || o.Filter.Categories[1] != deadletter.Conflict || o.Filter.Status != deadletter.StatusDead {
				t.Errorf("filter = %+v", o.Filter)
			}
		}},
		{name: "since duration", args: []string{"--since", "2h"}, check: func(t *testing.T, o *DLQListOptions) {
			if want := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC); !o.Filter.Since.Equal(want) {
				t.Errorf("since = %v, want %v", o.Filter.Since, want)
			}
		}},
		{name: "unknown category lists valid ones", args: []string{"--reason", "timeout"}, wantErr: "valid categories are transient-exhausted, validation"},
		{name: "unknown status lists valid ones", args: []string{"--status", "dead-ish"}, wantErr: "valid statuses are dead, in_request, replayed, discarded"},
		{name: "bad output names the right ones", args: []string{"-o", "yaml"}, wantErr: "use table, json or csv"},
		{name: "bad time", args: []string{"--until", "yesterday"}, wantErr: "use an RFC 3339 time"},
		{name: "bad cursor", args: []string{"--after", "!!"}, wantErr: "invalid cursor"},
		{name: "negative limit", args: []string{"--limit", "-1"}, wantErr: "0 to stream every match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			var got *DLQListOptions
			cmd := NewCmdDLQList(f, func(_ context.Context, o *DLQListOptions) error { got = o; return nil })
			cmd.SetArgs(c.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &FlagError{Err: err} })
			err := cmd.Execute()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				if ExitCode(err) != ExitUsage {
					t.Fatalf("exit code %d, want %d", ExitCode(err), ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, got)
		})
	}
}

func TestDLQIngestRequiresQueue(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	cmd := NewCmdDLQIngest(f, func(context.Context, *DLQIngestOptions) error { t.Fatal("ran without --queue"); return nil })
	cmd.SetArgs(nil)
	err := cmd.Execute()
	var flagErr *FlagError
	if !errors.As(err, &flagErr) || !strings.Contains(err.Error(), "--queue is required") {
		t.Fatalf("error = %v, want a flag error about --queue", err)
	}
}

func TestDLQShowRejectsBadID(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	cmd := NewCmdDLQShow(f, func(context.Context, *DLQShowOptions) error { t.Fatal("ran with a bad id"); return nil })
	cmd.SetArgs([]string{"forty-two"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "use the number in the ID column") {
		t.Fatalf("error = %v", err)
	}
}

func TestHelpNeverDials(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	f.DatabaseURLFlag = "postgres://nobody:secret@127.0.0.1:1/none"
	root := NewCmdRoot(f)
	root.SetArgs([]string{"dlq", "list", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("help has no examples:\n%s", out)
	}
	if f.pool != nil || f.amqpConn != nil {
		t.Fatal("--help opened a connection")
	}
}
