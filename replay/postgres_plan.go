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
		       coalesce(array_agg(DISTINCT q.queue ORDER BY q.queue) FILTER (WHERE q.queue <> ''), '{}')
		FROM expiryctl.replay_items i
		`+letterByItem+`
		`+targetByItem+`
		CROSS JOIN LATERAL (SELECT CASE
			WHEN t.e = '' THEN t.rk
			WHEN d.origin_queue IS NOT NULL THEN expiryctl.work_queue_of(d.origin_queue)
			ELSE '' END AS queue) q
		WHERE i.request_id = $1`, req.ID).Scan(&maxAttempts, &queues)
	return maxAttempts, queues, err
}
