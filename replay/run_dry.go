package replay

import (
	"context"
	"errors"

	"github.com/expiryctl/expiryctl/audit"
)

// DryRunItem is what a run would do with one item.
type DryRunItem struct {
	DeadLetterID  int64  `json:"dead_letter_id"`
	Ordinal       int    `json:"ordinal"`
	ReservationID string `json:"reservation_id"`
	// State is the item's run state now.
	State string `json:"state"`
	// Action is replay (it would be published), skip (the eligibility
	// query says no), block (it cannot be published: changed since frozen,
	// no target, target exchange missing, no key to refresh), discard, or
	// done (an earlier run already decided it).
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Target is where it would go.
	Target string `json:"target,omitempty"`
	// IdempotencyKey is the key the replayed job would carry (the fresh
	// one for a fresh-key request).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	MessageID      string `json:"message_id,omitempty"`
}

// DryRunResult is a run's plan without the run.
type DryRunResult struct {
	Request Request        `json:"request"`
	Items   []DryRunItem   `json:"items"`
	Counts  map[string]int `json:"counts"`
	// Canary is how many items would go first, then wait CanaryWindow.
	Canary int `json:"canary"`
	// DeadLetterQueues are, for a replay with a Broker, the queues its
	// open items came from and whether a run could capture each (By
	// "run"), read without consuming; a queue it could not would refuse
	// the run (dlq-unwatched) unless the request says --unwatched.
	DeadLetterQueues []WatchedQueue `json:"dead_letter_queues,omitempty"`
}

// DryRun says, for every item of request id, whether a run would replay,
// skip or block it and why, running the policy's eligibility query (read
// only) and checking target exchanges when a Broker is set. It publishes
// nothing and changes no state. Any open request may be dry-run (pending
// ones too, so an approver can look before approving). Audited as
// replay.dry_run.
func (r *Runner) DryRun(ctx context.Context, id int64) (DryRunResult, error) {
	svc := &Service{Pool: r.Pool, Actor: r.Actor}
	res, err := r.dryRun(ctx, id)
	if err != nil {
		svc.recordRefusal(ctx, "replay.dry_run", requestTarget(id), err, map[string]any{})
		return DryRunResult{}, err
	}
	err = audit.Record(ctx, r.Pool, audit.Entry{Actor: r.Actor, Action: "replay.dry_run", Target: requestTarget(id),
		Details: map[string]any{"status": res.Request.Status, "counts": res.Counts, "items": res.Request.Items}})
	return res, err
}

func (r *Runner) dryRun(ctx context.Context, id int64) (DryRunResult, error) {
	req, err := r.tables().RequestGet(ctx, id)
	if err != nil {
		return DryRunResult{}, err
	}
	if !req.Open() {
		return DryRunResult{}, refuse("terminal", "replay request %d is %s: there is nothing left to run", id, req.Status)
	}
	pol, err := r.tables().PolicyGet(ctx)
	if err != nil {
		return DryRunResult{}, err
	}
	res := DryRunResult{Request: req, Items: []DryRunItem{}, Counts: map[string]int{}, Canary: req.Canary}
	elig := newEligibility(pol.EligibilityQuery)
	exchanges := map[string]bool{}
	maxOrdinal, err := r.tables().ItemsMaxOrdinal(ctx, id)
	if err != nil {
		return DryRunResult{}, err
	}
	const page = 500
	for lo := 0; lo <= maxOrdinal; lo += page {
		items, err := r.tables().ItemsLoad(ctx, id, lo, lo+page-1, nil)
		if err != nil {
			return DryRunResult{}, err
		}
		byID, err := r.dryPlans(ctx, req, elig, items, exchanges)
		if err != nil {
			return DryRunResult{}, err
		}
		for _, it := range items {
			d := dryRunItem(req, it, byID[it.id])
			res.Counts[d.Action]++
			res.Items = append(res.Items, d)
		}
	}
	if req.Kind == KindReplay && r.Broker != nil {
		if res.DeadLetterQueues, err = r.dryWatch(ctx, id); err != nil {
			return DryRunResult{}, err
		}
	}
	return res, nil
}

// dryWatch says whether a run could capture each dead-letter queue the
// open items of request id came from: a passive declare, which takes no
// message, where the run would open a consumer.
func (r *Runner) dryWatch(ctx context.Context, id int64) ([]WatchedQueue, error) {
	queues, err := r.tables().RunWatchedQueues(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]WatchedQueue, 0, len(queues))
	for _, q := range queues {
		_, exists, err := r.Broker.QueueDepth(ctx, q)
		switch {
		case err != nil:
			out = append(out, WatchedQueue{Queue: q, Unwatched: truncateWords(err.Error(), 500)})
		case !exists:
			out = append(out, WatchedQueue{Queue: q, Unwatched: "the queue does not exist on this broker"})
		case r.OpenDLQ == nil:
			out = append(out, WatchedQueue{Queue: q, Unwatched: noCapture})
		default:
			out = append(out, WatchedQueue{Queue: q, By: "run"})
		}
	}
	return out, nil
}

// dryPlans plans the open items of a replay among items, by dead letter id.
// An eligibility query that fails is shown as the block it would halt the
// run with.
func (r *Runner) dryPlans(ctx context.Context, req Request, elig eligibility, items []*runItem, exchanges map[string]bool) (map[int64]plan, error) {
	var open []*runItem
	for _, it := range items {
		if it.state == "pending" || it.state == "publishing" {
			open = append(open, it)
		}
	}
	byID := map[int64]plan{}
	if req.Kind != KindReplay || len(open) == 0 {
		return byID, nil
	}
	plans, err := r.planItems(ctx, req, r.Actor, elig, open, exchanges)
	var eligErr *EligibilityError
	if errors.As(err, &eligErr) {
		for _, it := range open {
			byID[it.id] = plan{item: it, action: actionBlock, reason: eligErr.Error()}
		}
	} else if err != nil {
		return nil, err
	}
	for _, p := range plans {
		byID[p.item.id] = p
	}
	return byID, nil
}

// dryRunItem says what a run would do with it, planned as p.
func dryRunItem(req Request, it *runItem, p plan) DryRunItem {
	d := DryRunItem{DeadLetterID: it.id, Ordinal: it.ordinal, ReservationID: it.reservationID, State: it.state}
	switch {
	case it.state != "pending" && it.state != "publishing":
		d.Action = actionDone
	case req.Kind == KindDiscard:
		d.Action = actionDiscard
	default:
		d.Action, d.Reason, d.Target = p.action, p.reason, p.target
		if d.Action == actionFail {
			d.Action = actionBlock
		}
		if d.Action == actionReplay {
			d.IdempotencyKey, d.MessageID = it.idempotencyKey, p.msg.MessageID
			if p.newKey != "" {
				d.IdempotencyKey = p.newKey
			}
		}
	}
	return d
}
