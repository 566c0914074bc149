package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

func TestDLQDiscardRun(t *testing.T) {
	t.Parallel()
	discard := func(t *testing.T, requests *fakes.Requests, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		err := runCmd(NewCmdDLQDiscard(f, func(ctx context.Context, o *DLQDiscardOptions) error {
			o.Requests = serve[service.Requests](requests)
			return dlqDiscardRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}

	t.Run("asks for a discard request", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("alice")
		out, errOut, err := discard(t, requests, "--id", "42", "--id", "43", "--why", "load test data")
		if err != nil {
			t.Fatal(err)
		}
		if len(requests.Created) != 1 {
			t.Fatalf("created %d requests", len(requests.Created))
		}
		nr := requests.Created[0]
		if nr.Kind != replay.KindDiscard || len(nr.Selection.IDs) != 2 || nr.Selection.IDs[1] != 43 || nr.Why != "load test data" {
			t.Fatalf("request = %+v", nr)
		}
		if out != "discard request 1 is pending: 2 letters\n" {
			t.Fatalf("stdout %q", out)
		}
		if !strings.Contains(errOut, "`expiryctl replay approve 1`, then `expiryctl replay run 1`") {
			t.Fatalf("stderr %q names no next step", errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := discard(t, fakes.NewRequests("alice"), "--reason", "conflict", "--max", "100", "--why", "INC-1", "-o", "json")
		var r replay.Request
		if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Kind != replay.KindDiscard || r.Items != 100 {
			t.Fatalf("json = %+v, %v:\n%s", r, err, out)
		}
	})
	t.Run("a refusal exits 4", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("alice")
		requests.Refuse = &replay.Refusal{Rule: "max-cohort", Message: "a request holds at most 500 letters"}
		out, _, err := discard(t, requests, "--reason", "conflict", "--max", "1000", "--why", "INC-1")
		wantExit(t, err, ExitRefused)
		if out != "" {
			t.Fatalf("printed %q", out)
		}
	})
	t.Run("why is required", func(t *testing.T) {
		t.Parallel()
		requests := fakes.NewRequests("alice")
		_, _, err := discard(t, requests, "--id", "1")
		wantExit(t, err, ExitUsage)
		if len(requests.Created) != 0 {
			t.Fatal("created a request without --why")
		}
	})
}
