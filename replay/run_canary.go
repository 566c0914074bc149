package replay

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

func (x *replayRun) initCanary(ctx context.Context) error {
	req := x.st.req
	if req.Canary <= 0 {
		return nil
	}
	// Only replay_canary_record writes these rows "ok" (audit_append
	// refuses to), so a forged one cannot shorten or skip the canary.
	var passed bool
	if err := x.r.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM expiryctl.audit_log WHERE target = $1
		AND action = 'replay.canary.pass' AND outcome = 'ok' AND (details->>'approval')::int = $2)`, requestTarget(req.ID), req.Approvals).Scan(&passed); err != nil {
		return err
	}
	if passed {
		return nil
	}
	var waited float64
	err := x.r.Pool.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - at)::float8 FROM expiryctl.audit_log
		WHERE target = $1 AND action = 'replay.canary.start' AND outcome = 'ok' AND (details->>'approval')::int = $2
		ORDER BY seq DESC LIMIT 1`, requestTarget(req.ID), req.Approvals).Scan(&waited)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		x.canaryTarget = req.Canary
	case err != nil:
		return err
	default:
		// An earlier run published this approval's canary and died in its
		// window: wait out the rest, publish no second canary.
		d := time.Duration(waited * float64(time.Second))
		x.canaryWaitFrom = &d
	}
	return nil
}

// canaryWait waits out the canary window once every canary publish has its
// answer, halting early when the canary's letters die again or fail. waited
// is how much of the window an earlier run already waited (-1: the canary
// was just published by this run).
func (x *replayRun) canaryWait(ctx context.Context, waited time.Duration) *stopReason {
	r, st := x.r, x.st
	req := st.req
	x.drain(30 * time.Second)
	if x.lost != nil {
		return &stopReason{err: x.lost}
	}
	if err := x.rec.sync(); err != nil {
		return &stopReason{err: err}
	}
	if waited < 0 {
		waited = 0
		err := recordCanary(ctx, r, req.ID, false, map[string]any{"published": x.canaryPublished, "confirmed": st.confirmedRun,
			"failed": st.failedRun, "window_seconds": req.Stop.CanaryWindow.Seconds()})
		if err != nil {
			return &stopReason{err: err}
		}
	}
	end := time.Now().Add(req.Stop.CanaryWindow - waited)
	tick := time.NewTicker(r.checkInterval())
	defer tick.Stop()
	for {
		st.canaryLeft = max(0, time.Until(end))
		r.report(st, "canary-wait")
		if stop := x.check(true); stop != nil {
			return stop
		}
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return &stopReason{err: ctx.Err()}
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
	}
	st.canaryLeft = 0
	// The canary's failures are judged with no minimum: it is small on
	// purpose.
	if h := x.failureHalt(1); h != nil {
		return &stopReason{halt: h}
	}
	var redead int
	if err := r.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID).Scan(&redead); err != nil {
		return &stopReason{err: err}
	}
	err := recordCanary(ctx, r, req.ID, true, map[string]any{"confirmed": st.confirmedRun, "failed": st.failedRun,
		"redead": redead - st.redeadBase, "window_seconds": req.Stop.CanaryWindow.Seconds()})
	if err != nil {
		return &stopReason{err: err}
	}
	return nil
}

// recordCanary writes the canary's start or pass through the schema's
// replay_canary_record function: a resumed run trusts these rows (a pass
// skips the canary), so only the request's runner may write them.
func recordCanary(ctx context.Context, r *Runner, request int64, passed bool, details map[string]any) error {
	_, err := r.Pool.Exec(ctx, `SELECT expiryctl.replay_canary_record($1, $2, $3, $4)`, r.Actor, request, passed, details)
	return asRefusal(err)
}
