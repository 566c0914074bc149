package replay

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// ItemsPlanInputs reads, for a replay's plan, the most attempts any letter
// of the request's cohort went through and the queues its replay fills:
// per item the queue runItem.depthQueue names, distinct, sorted. The
// database gives each distinct route once (a cohort has a few); the queue
// a route fills is the runner's own rule, so that the plan and the run's
// stop condition cannot disagree on it. It reads every item once, which a
// cohort's size bounds.
func (p postgresTables) ItemsPlanInputs(ctx context.Context, req Request) (maxAttempts int, queues []string, err error) {
	rows, err := p.q.Query(ctx, `
		SELECT DISTINCT coalesce(max(d.attempts) OVER (), 0), t.rk IS NOT NULL, coalesce(t.e, ''), coalesce(t.rk, ''), coalesce(d.origin_queue, '')
		FROM expiryctl.replay_items i
		`+letterByItem+`
		`+targetByItem+`
		WHERE i.request_id = $1`, req.ID)
	if err != nil {
		return 0, nil, err
	}
	routes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runItem, error) {
		var it runItem
		return it, row.Scan(&maxAttempts, &it.hasTarget, &it.exchange, &it.routingKey, &it.originQueue)
	})
	if err != nil {
		return 0, nil, err
	}
	queues = []string{}
	for _, it := range routes {
		if q := it.depthQueue(); q != "" && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues)
	return maxAttempts, queues, nil
}

// RetriesInPlace implements tables.
func (p postgresTables) RetriesInPlace(ctx context.Context, system deadletter.System) (bool, error) {
	var inPlace bool
	err := p.q.QueryRow(ctx, `SELECT expiryctl.replay_retries_in_place($1)`, string(system)).Scan(&inPlace)
	return inPlace, err
}
