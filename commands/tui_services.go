package commands

import (
	"context"
	"errors"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui"
)

// tuiRunner runs requests for the terminal UI with the same runner as
// `replay run`, translating its progress into what the run screen shows.
type tuiRunner struct {
	runner service.Runner
	// request reads the request unaudited, for its rate ceiling and canary.
	request func(ctx context.Context, id int64) (replay.Request, error)
}

func (r *tuiRunner) Run(ctx context.Context, id int64, progress func(tui.RunProgress)) (tui.RunSummary, error) {
	req, err := r.request(ctx, id)
	if err != nil {
		return tui.RunSummary{}, err
	}
	// The runner's last progress, reported as it stops, holds what the
	// run's end shows (its rate, elapsed time, canary and stop readings);
	// the result's counts, settled by the database, replace its own.
	var last *replay.Progress
	res, err := r.runner.Run(ctx, id, func(p replay.Progress) {
		last = &p
		progress(tuiProgress(p, req))
	})
	final := tui.RunProgress{Limit: req.Rate, Stop: req.Stop, CanaryItems: req.Canary}
	if last != nil {
		final = tuiProgress(*last, req)
	}
	final.Total, final.Done = res.Items, res.Confirmed+res.Skipped+res.Failed
	final.Confirmed, final.Skipped, final.Failed = res.Confirmed, res.Skipped, res.Failed
	final.InFlight = 0
	if final.Halted == "" && res.Status == replay.StatusHalted {
		final.Halted = res.HaltCondition
	}
	summary := tui.RunSummary{Status: res.Status, HaltReason: res.HaltReason, Final: final}
	// A halt or a cancel is an outcome the screen shows, not a failure of
	// the call; the result says which.
	var halt *replay.HaltError
	if errors.As(err, &halt) && res.Status != "" {
		return summary, nil
	}
	return summary, err
}

func tuiProgress(p replay.Progress, req replay.Request) tui.RunProgress {
	s := p.Stops
	out := tui.RunProgress{Total: p.Total, Done: p.Done, Confirmed: p.Confirmed, Failed: p.Failed, Skipped: p.Skipped,
		Published: p.Published, InFlight: p.InFlight, Rate: p.Rate, Limit: req.Rate, CanaryItems: req.Canary,
		Canary: tuiCanary(s.Canary), Checked: s.Checked, FailureRatio: s.FailureRatio, Attempted: s.Attempted,
		FailedRun: s.FailedRun, QueueDepth: s.QueueDepth, DepthQueue: s.DepthQueue, RedeadRatio: s.RedeadRatio,
		Redead: s.Redead, ConfirmedRun: s.ConfirmedRun, Stop: req.Stop, Halted: s.Halted, Elapsed: p.Elapsed}
	if s.CanarySent > 0 && s.Canary != replay.CanaryPublishing {
		// The letters that went out, not the request's canary size: a
		// canary that halted at 3 of 4 must not say it sent 4.
		out.CanaryItems = s.CanarySent
	}
	switch p.Phase {
	case "canary-wait":
		out.Note = "waiting " + p.CanaryLeft.Round(1e9).String() + " for the canary's letters to come back"
	case "canary-outcomes":
		out.Note = "waiting for the canary's reservations to reach their terminal state"
	case "watching":
		out.Note = "all confirmed: watching " + p.CanaryLeft.Round(1e9).String() + " more for letters coming back"
	case "not-before":
		out.Note = "waiting until " + p.WaitUntil.UTC().Format(time.RFC3339) + ": not before the request's --not-before, a Retry-After or a hold not yet due"
	}
	if out.Note == "" && p.PaceWhy != "" {
		out.Note = "pace: " + p.PaceWhy
	}
	if p.Phase == "settling" {
		out.Note = "all published: waiting for the last reservations to reach their terminal state"
	}
	out.Outcomes = p.Outcomes
	return out
}

// tuiCanary names the runner's canary state as the run screen does.
func tuiCanary(state string) tui.CanaryState {
	switch state {
	case replay.CanaryPending:
		return tui.CanaryPending
	case replay.CanaryPublishing:
		return tui.CanarySending
	case replay.CanaryWaiting:
		return tui.CanaryWaiting
	case replay.CanaryPassed:
		return tui.CanaryPassed
	case replay.CanaryFailed:
		return tui.CanaryFailed
	case replay.CanaryStopped:
		return tui.CanaryStopped
	}
	return tui.CanaryNone
}

// tuiAudit reads and verifies the trail for the terminal UI's audit screen.
type tuiAudit struct{ reviewer service.AuditReviewer }

func (a *tuiAudit) List(ctx context.Context, f tui.AuditFilter, before int64, limit int) (tui.AuditPage, error) {
	var after *audit.Cursor
	if before > 0 {
		after = &audit.Cursor{Seq: before}
	}
	page, err := a.reviewer.List(ctx, audit.Filter{Actor: f.Actor, Action: f.Action, Target: f.Target}, after, limit)
	if err != nil {
		return tui.AuditPage{}, err
	}
	out := tui.AuditPage{Entries: make([]tui.AuditEntry, 0, len(page.Rows))}
	for _, r := range page.Rows {
		out.Entries = append(out.Entries, tui.AuditEntry{Seq: r.Seq, At: r.At, Actor: r.Actor, DBRole: r.DBRole,
			Action: r.Action, Target: r.Target, Outcome: r.Outcome, Details: string(r.Details)})
	}
	if page.Next != nil {
		out.Next = page.Next.Seq
	}
	return out, nil
}

func (a *tuiAudit) Verify(ctx context.Context) (tui.AuditCheck, error) {
	res, err := a.reviewer.Verify(ctx, 0, nil)
	check := tui.AuditCheck{OK: err == nil, Rows: res.Rows, Head: res.Head.Seq}
	var chain *audit.ChainError
	if errors.As(err, &chain) {
		check.BrokenAt, check.Problem = chain.Seq, string(chain.Problem)+": "+chain.Detail
		return check, nil
	}
	return check, err
}
