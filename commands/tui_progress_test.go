package commands

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui"
)

// TestTUIRunnerEndsWithTheRunnersLastWord: the run screen's last progress
// is the runner's last report (its readings, canary, rate and elapsed time,
// which the issue saw reset to zero and "none" at a halt), with the counts
// the database settled.
func TestTUIRunnerEndsWithTheRunnersLastWord(t *testing.T) {
	t.Parallel()
	req := fakes.Request(7, "alice", 10)
	req.Canary = 1
	last := replay.Progress{RequestID: 7, Phase: "stopping", Total: 10, Done: 1, Confirmed: 1, Published: 1, Rate: 0.2,
		Elapsed: 5 * time.Second, Stops: replay.Readings{Checked: true, Attempted: 1, QueueDepth: 350, DepthQueue: "work",
			Redead: 1, ConfirmedRun: 1, RedeadRatio: 1, Canary: replay.CanaryFailed, Halted: replay.ConditionRedeadRatio}}
	runner := &fakes.Runner{Steps: []replay.Progress{{RequestID: 7, Phase: "canary", Total: 10, Stops: replay.Readings{Canary: replay.CanaryPublishing}}, last},
		Result: replay.RunResult{RequestID: 7, Status: replay.StatusHalted, Items: 10, Confirmed: 1,
			HaltReason: "redead-ratio: 1 of 1 replayed letters died again", HaltCondition: replay.ConditionRedeadRatio},
		Err: &replay.HaltError{RequestID: 7, Condition: replay.ConditionRedeadRatio}}
	r := &tuiRunner{runner: runner, request: func(context.Context, int64) (replay.Request, error) { return req, nil }}
	var seen []tui.RunProgress
	sum, err := r.Run(context.Background(), 7, func(p tui.RunProgress) { seen = append(seen, p) })
	if err != nil {
		t.Fatalf("a halt is the screen's to show, not an error: %v", err)
	}
	if len(seen) != 2 || seen[0].Canary != tui.CanarySending {
		t.Errorf("progress %+v: want the canary going out first", seen)
	}
	f := sum.Final
	if f.Canary != tui.CanaryFailed || f.Redead != 1 || f.RedeadRatio != 1 || f.QueueDepth != 350 || f.DepthQueue != "work" ||
		f.Halted != replay.ConditionRedeadRatio || f.Elapsed != 5*time.Second || f.Rate != 0.2 || !f.Checked {
		t.Errorf("final %+v: want the runner's last readings", f)
	}
	if f.Total != 10 || f.Done != 1 || f.Confirmed != 1 || f.Stop != req.Stop || f.CanaryItems != 1 {
		t.Errorf("final %+v: want the settled counts and the request's limits", f)
	}
}

// TestTUIRunnerStoppedIsResumable: a run the operator stopped comes back as
// the runner's *replay.InterruptedError (the request left running), with the
// last progress as it stood.
func TestTUIRunnerStoppedIsResumable(t *testing.T) {
	t.Parallel()
	req := fakes.Request(7, "alice", 10)
	stop := &replay.InterruptedError{RequestID: 7, Err: context.Canceled}
	runner := &fakes.Runner{Steps: []replay.Progress{{Phase: "stopping", Total: 10, Done: 4, Confirmed: 4, Published: 5, Elapsed: 3 * time.Second}},
		Result: replay.RunResult{RequestID: 7, Status: replay.StatusRunning, Items: 10, Confirmed: 4}, Err: stop}
	r := &tuiRunner{runner: runner, request: func(context.Context, int64) (replay.Request, error) { return req, nil }}
	sum, err := r.Run(context.Background(), 7, func(tui.RunProgress) {})
	if !errors.As(err, new(*replay.InterruptedError)) {
		t.Fatalf("error %v, want the runner's interruption", err)
	}
	if sum.Final.Done != 4 || sum.Final.Published != 5 || sum.Final.Elapsed != 3*time.Second {
		t.Errorf("final %+v", sum.Final)
	}
}
