package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestDLQPurgeRun(t *testing.T) {
	t.Parallel()
	cutoff := fakes.Epoch.Add(-30 * 24 * time.Hour)
	type bundle struct {
		retention   *fakes.Retention
		policy      *fakes.Policy
		out, errOut string
	}
	purge := func(t *testing.T, tty bool, answer string, res deadletter.PurgeResult, args ...string) (bundle, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY, f.IO.StderrTTY = tty, tty
		f.IO.In = strings.NewReader(answer)
		b := bundle{retention: &fakes.Retention{Result: res}, policy: fakes.NewPolicy("alice")}
		err := runCmd(NewCmdDLQPurge(f, func(ctx context.Context, o *DLQPurgeOptions) error {
			o.Retention = serve[service.Retention](b.retention)
			if o.OlderThan == "" {
				o.Policy = serve[service.Policy](b.policy)
			} else {
				o.Policy = never[service.Policy](t, "the policy (--older-than gives the window)")
			}
			return dlqPurgeRun(ctx, o)
		}), args...)
		b.out, b.errOut = out.String(), errOut.String()
		return b, err
	}
	three := deadletter.PurgeResult{Cutoff: cutoff, Redacted: 3}

	t.Run("dry run over the policy's window", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, false, "", three, "--dry-run")
		if err != nil {
			t.Fatal(err)
		}
		if len(b.retention.Previews) != 1 || b.retention.Previews[0] != 30*24*time.Hour {
			t.Fatalf("previewed %v, want the policy's 720h", b.retention.Previews)
		}
		if len(b.retention.Purges) != 1 || !b.retention.Purges[0].DryRun {
			t.Fatalf("purges %+v, want one dry run", b.retention.Purges)
		}
		if b.out != "would redact 3 letters captured before "+cutoff.Format(time.RFC3339)+"\n" {
			t.Fatalf("stdout %q", b.out)
		}
	})
	t.Run("--older-than needs no policy", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, false, "", three, "--older-than", "7d", "--yes")
		if err != nil {
			t.Fatal(err)
		}
		if b.retention.Previews[0] != 7*24*time.Hour || b.retention.Purges[0].OlderThan != 7*24*time.Hour || b.retention.Purges[0].DryRun {
			t.Fatalf("previews %v, purges %+v", b.retention.Previews, b.retention.Purges)
		}
		if !strings.HasPrefix(b.out, "redacted 3 letters") {
			t.Fatalf("stdout %q", b.out)
		}
	})
	t.Run("piped without --yes is refused before anything changes", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, false, "", three)
		wantExit(t, err, ExitUsage)
		if !strings.Contains(err.Error(), "add --yes (or --dry-run)") || len(b.retention.Purges) != 0 {
			t.Fatalf("error %v after %d purges", err, len(b.retention.Purges))
		}
	})
	t.Run("nothing to redact needs no confirmation", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, false, "", deadletter.PurgeResult{Cutoff: cutoff})
		if err != nil || len(b.retention.Purges) != 1 || !strings.HasPrefix(b.out, "redacted 0 letters") {
			t.Fatalf("purge of nothing = %v, %+v, %q", err, b.retention.Purges, b.out)
		}
	})
	t.Run("a terminal asks, and yes purges with progress", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, true, "y\n", three)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.errOut, "redact payloads and headers of 3 letters captured before") ||
			!strings.Contains(b.errOut, "redacted 3 of 3") || len(b.retention.Purges) != 1 {
			t.Fatalf("stderr %q after %d purges", b.errOut, len(b.retention.Purges))
		}
	})
	t.Run("a terminal asks, and no cancels", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, true, "n\n", three)
		wantExit(t, err, ExitCancelled)
		if len(b.retention.Purges) != 0 || b.out != "" {
			t.Fatalf("purged %d times, printed %q", len(b.retention.Purges), b.out)
		}
	})
	t.Run("open requests are voided, and said so", func(t *testing.T) {
		t.Parallel()
		res := three
		res.InRequest = 1
		b, err := purge(t, false, "", res, "--yes")
		if err != nil || !strings.HasSuffix(b.out, "; 1 of them held by open requests, which the purge voided\n") {
			t.Fatalf("purge = %v, %q", err, b.out)
		}
		b, err = purge(t, false, "", res, "--dry-run")
		if err != nil || !strings.HasSuffix(b.out, "which the purge would void\n") {
			t.Fatalf("dry purge = %v, %q", err, b.out)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		b, err := purge(t, false, "", three, "--dry-run", "-o", "json")
		var got deadletter.PurgeResult
		if err != nil || json.Unmarshal([]byte(b.out), &got) != nil || got.Redacted != 3 || !got.DryRun {
			t.Fatalf("json = %+v, %v:\n%s", got, err, b.out)
		}
	})
	t.Run("bad window", func(t *testing.T) {
		t.Parallel()
		_, err := purge(t, false, "", three, "--older-than", "soon")
		wantExit(t, err, ExitUsage)
	})
}
