package replay

import (
	"context"
)

// ItemsPlanInputs reads, for a replay's plan, the most attempts any letter
// of the request's cohort went through and the queues its replay fills:
// per item the queue depthQueue names (the target queue when the item is
// routed by queue name, else the queue it died in, else the request's
// routing key when it targets the default exchange), distinct, sorted.
// It reads every item once, which a cohort's size bounds.
func (p postgresTables) ItemsPlanInputs(ctx context.Context, req Request) (maxAttempts int, queues []string, err error) {
	err = p.q.QueryRow(ctx, `
		SELECT coalesce(max(d.attempts), 0),
		       coalesce(array_agg(DISTINCT t.queue ORDER BY t.queue) FILTER (WHERE t.queue <> ''), '{}')
		FROM expiryctl.replay_items i
		`+letterByItem+`
		CROSS JOIN LATERAL (SELECT CASE
			WHEN (d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL) AND coalesce(d.original_exchange, '') = ''
				THEN coalesce(d.original_routing_key, '')
			WHEN d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL OR d.origin_queue IS NOT NULL
				THEN coalesce(d.origin_queue, '')
			WHEN $2 = '' THEN $3
			ELSE '' END AS queue) t
		WHERE i.request_id = $1`, req.ID, req.ToExchange, req.ToRoutingKey).Scan(&maxAttempts, &queues)
	return maxAttempts, queues, err
}
