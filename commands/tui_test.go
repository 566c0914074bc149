package commands

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui"
)

// TestTUIRun checks what `expiryctl tui` refuses before it opens anything;
// the UI itself is tested screen by screen with teatest in tui/, its
// services by TestTUIServicesRunAndAudit, and the whole in a terminal by
// e2e (TestTUI).
func TestTUIRun(t *testing.T) {
	t.Parallel()
	tuiCmd := func(t *testing.T, tty bool, args ...string) error {
		t.Helper()
		f, _, _ := testFactory(t)
		f.IO.StdoutTTY = tty
		return runCmd(NewCmdTUI(f, func(ctx context.Context, o *TUIOptions) error {
			o.Recorder = never[service.Recorder](t, "the recorder")
			o.Services = func(context.Context) (tui.Services, error) {
				t.Error("the command asked for its services")
				return tui.Services{}, errors.New("no services")
			}
			return tuiRun(ctx, o)
		}), args...)
	}
	// The test's stdin is a strings.Reader, never a terminal.
	for _, tty := range []bool{false, true} {
		err := tuiCmd(t, tty)
		wantExit(t, err, ExitUsage)
	}
	wantExit(t, tuiCmd(t, true, "--refresh", "-1s"), ExitUsage)
	wantExit(t, tuiCmd(t, true, "--work-queue", " "), ExitUsage)
}

// TestTUIWorkQueue: the summary's live queues are those of --work-queue,
// the topology's default unless given.
func TestTUIWorkQueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "reservation-expiry"}, {[]string{"--work-queue", "payments-expiry"}, "payments-expiry"}} {
		f, _, _ := testFactory(t)
		var got string
		err := runCmd(NewCmdTUI(f, func(_ context.Context, o *TUIOptions) error {
			got = o.WorkQueue
			return nil
		}), tc.args...)
		if err != nil || got != tc.want {
			t.Errorf("tui %v: work queue %q (%v), want %q", tc.args, got, err, tc.want)
		}
	}
}

func TestTUIRunnerAdapter(t *testing.T) {
	t.Parallel()
	req := replay.Request{ID: 7, Rate: 20, Canary: 2}
	request := func(context.Context, int64) (replay.Request, error) { return req, nil }
	runner := &fakes.Runner{
		Steps: []replay.Progress{
			{Phase: "canary", Total: 10, Done: 1, Confirmed: 1, Stops: replay.Readings{Canary: replay.CanaryPublishing}},
			{Phase: "canary-wait", Total: 10, Done: 2, Confirmed: 2, CanaryLeft: 29_600_000_000, Stops: replay.Readings{Canary: replay.CanaryWaiting}},
			{Phase: "replay", Total: 10, Done: 6, Confirmed: 3, Failed: 1, Skipped: 2, Rate: 18.5,
				Stops: replay.Readings{Canary: replay.CanaryPassed, Attempted: 4, FailedRun: 1, FailureRatio: 0.25}},
		},
		Result: replay.RunResult{RequestID: 7, Status: replay.StatusHalted, Items: 10, Confirmed: 3, Failed: 1, Skipped: 2,
			HaltReason: "failure ratio 0.25 above 0.05"},
		Err: &replay.HaltError{RequestID: 7, Condition: "failure-ratio"},
	}
	var seen []tui.RunProgress
	summary, err := (&tuiRunner{runner: runner, request: request}).Run(context.Background(), 7, func(p tui.RunProgress) { seen = append(seen, p) })
	if err != nil {
		t.Fatalf("a halt is an outcome for the screen, not an error: %v", err)
	}
	if summary.Status != replay.StatusHalted || summary.HaltReason != "failure ratio 0.25 above 0.05" ||
		summary.Final.Total != 10 || summary.Final.Done != 6 || summary.Final.Failed != 1 || summary.Final.Rate != 18.5 ||
		summary.Final.Canary != tui.CanaryPassed || summary.Final.Halted != "" {
		t.Fatalf("summary = %+v", summary)
	}
	if len(seen) != 3 || seen[0].Canary != tui.CanarySending || seen[0].Limit != 20 || seen[0].CanaryItems != 2 ||
		seen[1].Canary != tui.CanaryWaiting || seen[1].Note != "waiting 30s for the canary's letters to come back" ||
		seen[2].Canary != tui.CanaryPassed || seen[2].FailureRatio != 0.25 || seen[2].Rate != 18.5 {
		t.Fatalf("progress = %+v", seen)
	}

	// Refused before it started: the error is the screen's to show.
	refused := &fakes.Runner{Err: &replay.Refusal{Rule: "approval-expired", Message: "expired"}}
	if _, err := (&tuiRunner{runner: refused, request: request}).Run(context.Background(), 7, func(tui.RunProgress) {}); ExitCode(err) != ExitRefused {
		t.Fatalf("a refused run = %v, want the refusal", err)
	}
}

func TestTUIAuditAdapter(t *testing.T) {
	t.Parallel()
	reviewer := &fakes.Reviewer{Rows: fakes.AuditRows(5), Result: audit.Result{Rows: 5, Head: audit.Anchor{Seq: 5}}}
	trail := &tuiAudit{reviewer: reviewer}
	page, err := trail.List(context.Background(), tui.AuditFilter{Actor: "bob"}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Seq != 3 || page.Entries[0].Details != `{"n":1}` || page.Next != 3 {
		t.Fatalf("page = %+v", page)
	}
	check, err := trail.Verify(context.Background())
	if err != nil || check != (tui.AuditCheck{OK: true, Rows: 5, Head: 5}) {
		t.Fatalf("verify = %+v, %v", check, err)
	}
	reviewer.VerifyErr = &audit.ChainError{Seq: 4, Problem: audit.BrokenLink, Detail: "prev_hash differs"}
	check, err = trail.Verify(context.Background())
	if err != nil || check.OK || check.BrokenAt != 4 || check.Problem != string(audit.BrokenLink)+": prev_hash differs" {
		t.Fatalf("broken verify = %+v, %v", check, err)
	}
}

// TestTUIExampleReviewsWithOwnLogin: four-eyes goes by the database login,
// so a second reviewer needs a login of their own; --actor is only a label
// the database records beside the login, and its approvals are refused.
func TestTUIExampleReviewsWithOwnLogin(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	ex := NewCmdTUI(f, nil).Example
	if strings.Contains(ex, "--actor") || !strings.Contains(ex, "postgres://bob@") {
		t.Errorf("tui --help's example should review with bob's own login, not --actor:\n%s", ex)
	}
}
