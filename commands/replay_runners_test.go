package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// runningRequest is request id running, held by runner ("" for none).
func runningRequest(id int64, runner string) replay.Request {
	r := fakes.Request(id, "alice", 100)
	r.Status, r.ReviewedBy = replay.StatusRunning, "bob"
	held := runner != ""
	r.RunnerHeld, r.Runner = &held, runner
	return r
}

const heldBy = `"expiryctl replay run by carol@host-1" (PostgreSQL backend 4242 of login carol)`

// A running request that no runner holds says so in `replay show`, with the
// command that resumes it, in the table and in -o json; one with its runner
// names it.
func TestReplayShowSaysWhetherARunnerHoldsIt(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, args ...string) string {
		t.Helper()
		f, out, _ := testFactory(t)
		requests := fakes.NewRequests("dave", runningRequest(8, ""), runningRequest(9, heldBy), fakes.Request(10, "alice", 1))
		err := runCmd(NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
			o.Requests = serve[service.Requests](requests)
			o.Planner = serve[service.Planner](&fakes.Planner{Result: examplePlan()})
			return replayShowRun(ctx, o)
		}), args...)
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	gone := show(t, "8", "--sample", "0")
	for _, want := range []string{"Replay request 8 — replay running (no runner)",
		"runner               none: no process runs this request", "resume it with `expiryctl replay run 8` (no new approval needed)"} {
		if !strings.Contains(gone, want) {
			t.Errorf("replay show 8 lacks %q:\n%s", want, gone)
		}
	}
	if held := show(t, "9", "--sample", "0"); !strings.Contains(held, "runner               held by "+heldBy) ||
		strings.Contains(held, "no runner") || !strings.Contains(held, "Replay request 9 — replay running\n") {
		t.Errorf("replay show 9 should name its runner:\n%s", held)
	}
	if pending := show(t, "10", "--sample", "0"); strings.Contains(pending, "runner ") {
		t.Errorf("a pending request has no runner line:\n%s", pending)
	}
	for id, want := range map[string]string{"8": `"runner_held": false`, "9": `"runner_held": true`} {
		if doc := show(t, id, "-o", "json"); !strings.Contains(doc, want) {
			t.Errorf("replay show %s -o json lacks %s:\n%s", id, want, doc)
		}
	}
	if doc := show(t, "10", "-o", "json"); strings.Contains(doc, "runner_held") {
		t.Errorf("a pending request's json has runner_held:\n%s", doc)
	}
}

// `replay list` piped keeps STATUS as the status, for scripts, and says
// below the list, on stderr, which running request no runner holds and
// how to resume it; on a terminal the row says it too.
func TestReplayListNamesRunsWithoutARunner(t *testing.T) {
	t.Parallel()
	f, out, errOut := testFactory(t)
	requests := fakes.NewRequests("dave", runningRequest(8, ""), runningRequest(9, heldBy), fakes.Request(10, "alice", 1))
	err := runCmd(NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
		o.Requests = serve[service.Requests](requests)
		return replayListRun(ctx, o)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "8\treplay\trunning\t100\t") || !strings.Contains(out.String(), "9\treplay\trunning\t100\t") {
		t.Errorf("list printed:\n%s", out)
	}
	want := "replay request 8 is running, but no runner holds it: nothing is being published; resume it with `expiryctl replay run 8`\n"
	if errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}

	f, out, _ = testFactory(t)
	f.IO.StdoutTTY = true
	if err := runCmd(NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
		o.Requests = serve[service.Requests](requests)
		return replayListRun(ctx, o)
	})); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for _, tc := range []struct{ id, want string }{{"8 ", "running (no runner)"}, {"9 ", "running "}} {
		for _, l := range lines {
			if strings.HasPrefix(l, tc.id) && !strings.Contains(l, tc.want) {
				t.Errorf("on a terminal, request %sreads %q, want %q", tc.id, l, tc.want)
			}
		}
	}
	if strings.Count(out.String(), "no runner") != 1 {
		t.Errorf("on a terminal, only request 8 has no runner:\n%s", out)
	}
}

// Piped, a watch of a running request says runner_held=, and a watch of
// the list names the runs without a runner in no_runner=.
func TestWatchLinesSayWhetherARunnerHoldsIt(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	requests := fakes.NewRequests("dave", runningRequest(8, ""), runningRequest(9, heldBy))
	reads := fakes.NewRequestReads(requests)
	err := watchRun(t, f, 1, func(int) {}, func(clock *watchClock) *cobra.Command {
		return NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
			o.Requests, o.UnauditedRequests = reads.Audited, reads.Unaudited
			clock.install(o.Watch)
			return replayListRun(ctx, o)
		})
	}, "--watch")
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-30T03:00:00Z requests=2 running=2 open=9:running,8:running no_runner=8\n"; out.String() != want {
		t.Errorf("replay list --watch piped: %q, want %q", out, want)
	}
	for id, want := range map[int64]string{8: "runner_held=false", 9: "runner_held=true"} {
		d, err := requests.Show(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if line := requestLine(d); !strings.Contains(line, " changes=0 "+want) {
			t.Errorf("request %d: %q lacks %s", id, line, want)
		}
	}
}
