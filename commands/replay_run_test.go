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

func TestReplayRunRun(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, runner *fakes.Runner, tty bool, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY, f.IO.StderrTTY = tty, tty
		err := runCmd(NewCmdReplayRun(f, func(ctx context.Context, o *ReplayRunOptions) error {
			o.Runner = serve[service.Runner](runner)
			return replayRunRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	completed := replay.RunResult{RequestID: 7, Kind: replay.KindReplay, Status: replay.StatusCompleted, Items: 3,
		Confirmed: 3, Published: 3, Elapsed: 1.5}

	t.Run("completed", func(t *testing.T) {
		t.Parallel()
		runner := &fakes.Runner{Result: completed}
		out, errOut, err := run(t, runner, false, "7")
		if err != nil {
			t.Fatal(err)
		}
		if out != "REQUEST\tKIND\tSTATUS\tCONFIRMED\tSKIPPED\tFAILED\tPUBLISHED\tELAPSED\tHALT-REASON\n7\treplay\tcompleted\t3\t0\t0\t3\t1.5s\t-\n" {
			t.Fatalf("stdout %q", out)
		}
		if errOut != "replay request 7 completed: 3 confirmed, 0 skipped, 0 failed (3 published by this run)\n"+
			"replay request 7: its approval is unsigned, and this runner does not require signatures (--keyring)\n" {
			t.Fatalf("stderr %q", errOut)
		}
		if len(runner.Runs) != 1 || runner.Runs[0] != 7 {
			t.Fatalf("runs %v", runner.Runs)
		}
	})
	t.Run("a failover is said on its own line, on a pipe too", func(t *testing.T) {
		t.Parallel()
		lost := replay.Failover{From: "10.0.0.1:5672", To: "10.0.0.3:5672", Cause: "lost the RabbitMQ publishing channel: the connection to RabbitMQ closed",
			InFlight: 4, Took: 0.412}
		step := replay.Progress{RequestID: 7, Kind: replay.KindReplay, Phase: "replay", Total: 3, Done: 1}
		steps := []replay.Progress{step, step, step}
		steps[1].Phase, steps[1].Failovers = "failover", []replay.Failover{lost}
		steps[2].Failovers = []replay.Failover{lost}
		_, errOut, err := run(t, &fakes.Runner{Result: completed, Steps: steps}, false, "7")
		want := "replay request 7: lost RabbitMQ node 10.0.0.1:5672 (lost the RabbitMQ publishing channel: the connection to RabbitMQ closed); " +
			"failed over to 10.0.0.3:5672 in 412ms and goes on: 4 items in flight there, confirm unknown, go out again (the job's idempotency key absorbs a copy that did arrive)\n"
		if err != nil || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "lost RabbitMQ node") != 1 || strings.Contains(errOut, "done (") {
			t.Fatalf("stderr = %v, %q; want once %q and no progress line", err, errOut, want)
		}
	})
	t.Run("a resumed run says how much it published again", func(t *testing.T) {
		t.Parallel()
		res := completed
		res.Resumed, res.Republished = true, 2
		_, errOut, err := run(t, &fakes.Runner{Result: res}, false, "7")
		if err != nil || !strings.Contains(errOut, "(3 published by this run, 2 of them again after an earlier runner stopped)\n") {
			t.Fatalf("resumed = %v, %q", err, errOut)
		}
		res.Status = replay.StatusCancelled
		_, errOut, err = run(t, &fakes.Runner{Result: res}, false, "7")
		if err != nil || !strings.HasPrefix(errOut, "replay request 7 was resumed and is now cancelled\n") {
			t.Fatalf("resumed and cancelled = %v, %q", err, errOut)
		}
	})
	t.Run("progress on a terminal", func(t *testing.T) {
		t.Parallel()
		runner := &fakes.Runner{Result: completed, Steps: []replay.Progress{
			{RequestID: 7, Kind: replay.KindReplay, Phase: "canary", Total: 3, Done: 1, Confirmed: 1, InFlight: 1, Rate: 2},
			{RequestID: 7, Kind: replay.KindReplay, Phase: "stopping", Total: 3, Done: 3},
		}}
		_, errOut, err := run(t, runner, true, "7")
		if err != nil || !runner.Progressed[0] {
			t.Fatalf("run = %v, progressed %v", err, runner.Progressed)
		}
		want := "\r\x1b[Kreplay 7: 1/3 done (1 confirmed, 0 skipped, 0 failed), 1 in flight, 2.0/s — canary going out"
		if !strings.HasPrefix(errOut, want+"\r\x1b[K") {
			t.Fatalf("stderr %q, want it to start with %q and clear the line", errOut, want)
		}
	})
	t.Run("halted exits 8 and shows where it stopped", func(t *testing.T) {
		t.Parallel()
		res := completed
		res.Status, res.Confirmed, res.Failed, res.HaltReason = replay.StatusHalted, 1, 2, "failure ratio 0.67 above 0.05"
		out, _, err := run(t, &fakes.Runner{Result: res, Err: &replay.HaltError{RequestID: 7, Condition: "failure-ratio", Reason: res.HaltReason}}, false, "7")
		wantExit(t, err, ExitHalted)
		if !strings.Contains(out, "\thalted\t1\t0\t2\t3\t1.5s\tfailure ratio 0.67 above 0.05\n") {
			t.Fatalf("stdout %q", out)
		}
	})
	t.Run("refused before it started prints nothing", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := run(t, &fakes.Runner{Err: &replay.Refusal{Rule: "approval-expired", Message: "the approval of replay request 7 expired"}}, false, "7")
		wantExit(t, err, ExitRefused)
		if out != "" || errOut != "" {
			t.Fatalf("a refusal printed %q / %q", out, errOut)
		}
	})
	t.Run("completed with failed items fails and lists them", func(t *testing.T) {
		t.Parallel()
		res := completed
		res.Confirmed, res.Failed = 2, 1
		res.FailedItems = []replay.ItemOutcome{{DeadLetterID: 42, Reason: "returned unroutable"}}
		out, _, err := run(t, &fakes.Runner{Result: res}, false, "7")
		wantExit(t, err, ExitError)
		if !strings.Contains(err.Error(), "1 item failed to publish") || !strings.HasSuffix(out, "\nFAILED-ITEM\tREASON\n42\treturned unroutable\n") {
			t.Fatalf("error %v, stdout %q", err, out)
		}
	})
	t.Run("a discard says it discarded, not confirmed", func(t *testing.T) {
		t.Parallel()
		res := completed
		res.Kind, res.Confirmed, res.Published = replay.KindDiscard, 1, 0
		_, errOut, err := run(t, &fakes.Runner{Result: res}, false, "7")
		if err != nil || !strings.Contains(errOut, "discard request 7 completed: 1 letter discarded, 0 skipped\n") || strings.Contains(errOut, "confirmed") {
			t.Fatalf("run = %v, stderr %q", err, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := run(t, &fakes.Runner{Result: completed}, false, "7", "-o", "json")
		var got replay.RunResult
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Status != replay.StatusCompleted || got.Confirmed != 3 {
			t.Fatalf("json = %+v, %v:\n%s", got, err, out)
		}
	})
	t.Run("dry run publishes nothing", func(t *testing.T) {
		t.Parallel()
		runner := &fakes.Runner{Plan: replay.DryRunResult{
			Request: replay.Request{ID: 7, Kind: replay.KindReplay, Status: replay.StatusApproved},
			Items: []replay.DryRunItem{
				{DeadLetterID: 42, Ordinal: 0, ReservationID: "r-42", State: "pending", Action: "replay", Target: "exchange reservations key reservation.expire"},
				{DeadLetterID: 43, Ordinal: 1, State: "pending", Action: "block", Reason: "no target"},
			},
			Counts: map[string]int{"replay": 1, "block": 1},
		}}
		out, errOut, err := run(t, runner, false, "7", "--dry-run")
		if err != nil {
			t.Fatal(err)
		}
		if len(runner.Runs) != 0 || len(runner.DryRuns) != 1 {
			t.Fatalf("runs %v, dry runs %v", runner.Runs, runner.DryRuns)
		}
		if out != "#\tLETTER\tRESERVATION\tSTATE\tACTION\tTARGET\tWHY\n1\t42\tr-42\tpending\treplay\texchange reservations key reservation.expire\t-\n2\t43\t-\tpending\tblock\t-\tno target\n" {
			t.Fatalf("stdout %q", out)
		}
		if errOut != "dry run of replay request 7 (approved): 1 replay, 0 skip, 1 block, 0 discard, 0 already done; nothing was published or changed\n" {
			t.Fatalf("stderr %q", errOut)
		}
		out, _, err = run(t, runner, false, "7", "--dry-run", "-o", "json")
		var plan replay.DryRunResult
		if err != nil || json.Unmarshal([]byte(out), &plan) != nil || len(plan.Items) != 2 {
			t.Fatalf("dry run json = %+v, %v", plan, err)
		}
	})
	t.Run("bad id", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{}, {"x"}, {"-3"}, {"1", "2"}} {
			_, _, err := run(t, &fakes.Runner{}, false, args...)
			wantExit(t, err, ExitUsage)
		}
	})
	t.Run("unreachable database", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdReplayRun(f, func(ctx context.Context, o *ReplayRunOptions) error {
			o.Runner = unreachable[service.Runner]()
			return replayRunRun(ctx, o)
		}), "7")
		wantExit(t, err, ExitUnavailable)
	})
}
