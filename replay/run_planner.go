package replay

import (
	"context"
	"fmt"
	"time"
)

// Plan actions for an item.
const (
	actionReplay  = "replay"
	actionSkip    = "skip"
	actionBlock   = "block"
	actionFail    = "fail"
	actionDiscard = "discard"
	actionDone    = "done"
)

// plan is what the runner will do with one item and why.
type plan struct {
	item   *runItem
	action string
	reason string
	target string
	msg    Message
	newKey string
}

func describeTarget(exchange, key string) string {
	if exchange == "" {
		return "queue " + key + " (default exchange)"
	}
	return "exchange " + exchange + " key " + key
}

// planItems decides each item: blocked (changed since frozen, no target,
// unreadable), failed (target exchange missing), skipped (not eligible) or
// replayed, with the message it would be. Eligibility runs last, only for
// items that would otherwise be replayed.
// replayedBy is the name sent as x-replayed-by: the run's label.
func (r *Runner) planItems(ctx context.Context, req Request, replayedBy string, elig eligibility, items []*runItem, exchanges map[string]bool) ([]plan, error) {
	if d, ok := r.Broker.(Delayer); ok {
		for _, it := range items {
			if !it.inPlace {
				it.maxDelay = d.MaxDelay(it.routingKey)
			}
		}
	}
	plans := make([]plan, len(items))
	var candidates []*runItem
	idx := map[int64]int{}
	for i, it := range items {
		idx[it.id] = i
		p, err := r.planItem(ctx, req, replayedBy, it, exchanges)
		if err != nil {
			return nil, err
		}
		plans[i] = p
		if p.action == actionReplay {
			candidates = append(candidates, it)
		}
	}
	ineligible, err := elig.checkAll(ctx, r.reservationsPool(), candidates)
	if err != nil {
		return nil, err
	}
	for id, why := range ineligible {
		p := &plans[idx[id]]
		p.action, p.reason, p.msg = actionSkip, why, Message{}
	}
	return plans, nil
}

// planItem decides one item, eligibility aside. An error is the broker's,
// asked whether the target exchange exists.
func (r *Runner) planItem(ctx context.Context, req Request, replayedBy string, it *runItem, exchanges map[string]bool) (plan, error) {
	p := plan{item: it}
	if why := it.changed(); why != "" {
		p.action, p.reason = actionBlock, why
		return p, nil
	}
	exchange, key, ok := it.target()
	if !ok {
		p.action, p.reason = actionBlock, "no target: the letter names no origin and the request no --to-exchange/--routing-key"
		return p, nil
	}
	p.target = describeTarget(exchange, key)
	exists, err := r.exchangeExists(ctx, exchange, exchanges)
	if err != nil {
		return plan{}, err
	}
	if !exists {
		p.action, p.reason = actionFail, fmt.Sprintf("exchange %q does not exist on the broker", exchange)
		return p, nil
	}
	msg, newKey, blocked := r.replayMessage(req, replayedBy, it, exchange, key)
	if blocked != "" {
		p.action, p.reason = actionBlock, blocked
		return p, nil
	}
	p.action, p.msg, p.newKey = actionReplay, msg, newKey
	return p, nil
}

// exchangeExists asks the broker once per exchange and run (known holds the
// answers); with no broker, every exchange is taken to exist.
func (r *Runner) exchangeExists(ctx context.Context, exchange string, known map[string]bool) (bool, error) {
	exists, asked := known[exchange]
	routes, isRoutes := r.Broker.(Routes)
	switch {
	case asked:
		return exists, nil
	case !isRoutes:
		// No broker, or one whose messages go straight to a queue.
		return true, nil
	}
	exists, err := routes.RouteExists(ctx, exchange)
	if err != nil {
		return false, err
	}
	known[exchange] = exists
	return exists, nil
}

// replayMessage builds the message that replays it, with the fresh key it
// carries for a fresh-key request; blocked says why it cannot be built.
// A job store's job is retried where it is; any other letter is sent as a
// copy its system's driver encodes (Encoder).
func (r *Runner) replayMessage(req Request, replayedBy string, it *runItem, exchange, key string) (msg Message, newKey, blocked string) {
	if it.inPlace {
		return r.jobRetryMessage(req, replayedBy, it, key)
	}
	enc, ok := r.Broker.(Encoder)
	if !ok {
		return Message{}, "", fmt.Sprintf("the run's connection cannot send copies of %s letters", it.system.OrDefault())
	}
	body := it.payload
	if req.FreshKey {
		var err error
		if body, newKey, err = rewriteIdempotencyKey(it.payload, req.ID); err != nil {
			return Message{}, "", "cannot give it a fresh key: " + err.Error()
		}
	}
	c := Copy{Item: it.id, System: it.system.OrDefault(), Exchange: exchange, RoutingKey: key, Headers: Stripped(it.headers),
		Properties: it.properties, ContentType: it.contentType, MessageID: it.messageID, GroupID: it.groupID, Body: body,
		Request: req.ID, FreshKeys: req.FreshKey, Marks: marks(req, replayedBy, it.id, it.replayCount, r.now())}
	if it.delayable() {
		c.NotBefore = it.notBefore
	}
	msg, err := enc.Encode(c)
	if err != nil {
		return Message{}, "", err.Error()
	}
	return msg, newKey, ""
}

// jobRetryMessage is replayMessage for a job store's letter: the job is
// retried where it is, with its own payload, and the replay's marks are
// written on it, so that the job, dying again, names this replay. A fresh
// key would need a new job; the request refuses one (rule fresh-key).
func (r *Runner) jobRetryMessage(req Request, replayedBy string, it *runItem, queue string) (msg Message, newKey, blocked string) {
	if it.job.ID == "" || it.job.Incarnation == "" {
		return Message{}, "", "the letter does not name the job it captured (no job id or incarnation): it cannot be retried in place"
	}
	if req.FreshKey {
		return Message{}, "", "a job store retries the job with its own payload: a fresh idempotency key cannot be given"
	}
	written := map[string]any{}
	for _, m := range marks(req, replayedBy, it.id, it.replayCount, r.now()) {
		if at, ok := m.Value.(time.Time); ok {
			m.Value = at.Format(time.RFC3339)
		}
		written[m.Name] = m.Value
	}
	return Message{Item: it.id, RoutingKey: queue, System: it.system, Headers: written, Job: it.job}, "", ""
}

// planned is one window of items, planned without eligibility.
type planned struct {
	plans []plan
	last  bool
	err   error
}

// plan reads the open items window by window (windows of ordinals, which
// keeps every read bounded by index however stale the table statistics)
// and plans them, until the cohort ends or the preparer stops.
func (p *preparer) plan() {
	req := p.st.req
	send := func(pl planned) bool {
		select {
		case p.planned <- pl:
			return true
		case <-p.stop:
			return false
		}
	}
	none := eligibility{}
	for after := -1; ; {
		if after >= p.st.maxOrdinal {
			send(planned{last: true})
			return
		}
		lo, hi := after+1, after+p.window
		after = hi
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		items, err := p.r.tables().ItemsLoad(ctx, req.ID, lo, hi, []string{"pending", "publishing"})
		for _, it := range items {
			p.queues.add(it.depthQueue())
		}
		var plans []plan
		if err == nil && len(items) > 0 {
			plans, err = p.r.planItems(ctx, req, p.st.label, none, items, p.exchanges)
		}
		cancel()
		if err != nil {
			send(planned{err: fmt.Errorf("read the items of replay request %d: %w", req.ID, err)})
			return
		}
		if len(plans) > 0 && !send(planned{plans: plans}) {
			return
		}
	}
}
