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
	plans := make([]plan, len(items))
	var candidates []*runItem
	idx := map[int64]int{}
	for i, it := range items {
		p := plan{item: it}
		plans[i] = p
		idx[it.id] = i
		if why := it.changed(); why != "" {
			plans[i].action, plans[i].reason = actionBlock, why
			continue
		}
		exchange, key, ok := it.target(req)
		if !ok {
			plans[i].action, plans[i].reason = actionBlock, "no target: the letter names no origin and the request no --to-exchange/--routing-key"
			continue
		}
		plans[i].target = describeTarget(exchange, key)
		exists, known := exchanges[exchange]
		if !known && r.Broker != nil {
			var err error
			if exists, err = r.Broker.ExchangeExists(ctx, exchange); err != nil {
				return nil, err
			}
			exchanges[exchange] = exists
		} else if !known {
			exists = true
		}
		if !exists {
			plans[i].action, plans[i].reason = actionFail, fmt.Sprintf("exchange %q does not exist on the broker", exchange)
			continue
		}
		props, moved, err := replayProperties(it.properties, it.contentType, it.messageID, r.PublishAs)
		if err != nil {
			plans[i].action, plans[i].reason = actionBlock, "stored properties cannot be decoded: "+err.Error()
			continue
		}
		headers, err := replayHeaders(it.headers, req, replayedBy, it.id, it.replayCount, r.now(), moved)
		if err != nil {
			plans[i].action, plans[i].reason = actionBlock, "stored headers cannot be decoded: "+err.Error()
			continue
		}
		body, messageID := it.payload, props.MessageID
		if req.FreshKey {
			var newKey string
			body, newKey, err = rewriteIdempotencyKey(it.payload, req.ID)
			if err != nil {
				plans[i].action, plans[i].reason = actionBlock, "cannot give it a fresh key: "+err.Error()
				continue
			}
			plans[i].newKey = newKey
			if messageID != "" {
				messageID = freshKey(messageID, req.ID)
			}
		}
		plans[i].action = actionReplay
		props.MessageID = messageID
		plans[i].msg = Message{Item: it.id, Exchange: exchange, RoutingKey: key, Properties: props,
			Headers: headers, Body: body}
		candidates = append(candidates, it)
	}
	ineligible, err := elig.checkAll(ctx, r.Pool, candidates)
	if err != nil {
		return nil, err
	}
	for id, why := range ineligible {
		p := &plans[idx[id]]
		p.action, p.reason, p.msg = actionSkip, why, Message{}
	}
	return plans, nil
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
			p.queues.add(it.depthQueue(req))
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
