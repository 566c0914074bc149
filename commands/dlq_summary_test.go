package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestDLQSummaryRun(t *testing.T) {
	t.Parallel()
	summary := func(t *testing.T, archive service.Archive, tty bool, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY = tty
		f.Now = fakes.Now
		err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive = serve(archive)
			return dlqSummaryRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}

	t.Run("piped table", func(t *testing.T) {
		t.Parallel()
		out, _, err := summary(t, fakes.Letters(8), false)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || lines[0] != "CATEGORY\tWAITING\tTOTAL\tOLDEST\tQUEUES" {
			t.Fatalf("summary printed:\n%s", out)
		}
		// Letter 3 is the oldest conflict (letters 3 and 7), both from the EU
		// queue; times are exact when piped.
		want := "conflict\t2\t2\t" + fakes.Letter(3).DeadLetteredAt.Format("2006-01-02T15:04:05Z") + "\treservation-expiry-eu.dlq"
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("summary lacks %q:\n%s", want, out)
		}
	})
	t.Run("terminal ages", func(t *testing.T) {
		t.Parallel()
		out, _, err := summary(t, fakes.Letters(4), true)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "d ago") {
			t.Fatalf("a terminal shows ages:\n%s", out)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := summary(t, fakes.Letters(4), false, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got []deadletter.CategorySummary
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 4 || got[0].Category != deadletter.TransientExhausted {
			t.Fatalf("json = %v (%v):\n%s", got, err, out)
		}
	})
	t.Run("empty archive on a terminal says how to fill it", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := summary(t, fakes.NewArchive(), true)
		if err != nil || out != "" || !strings.Contains(errOut, "expiryctl dlq ingest --queue QUEUE") {
			t.Fatalf("empty summary = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("unreachable database", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		err := runCmd(NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive = unreachable[service.Archive]()
			return dlqSummaryRun(ctx, o)
		}))
		wantExit(t, err, ExitUnavailable)
		if out.Len() != 0 {
			t.Fatalf("printed %q", out)
		}
	})
}
