package replay

import (
	"context"
	"time"
)

// RunLockHolders reads replay_runner_leases for the standing sessions
// holding the runner leases of requests. Only the pid, login and
// application name of another login's session are visible to a login
// without pg_read_all_stats (pg_stat_activity hides the rest as NULL), so
// address and since are left empty when hidden; a visible session without
// a client address came over the local socket.
func (p postgresTables) RunLockHolders(ctx context.Context, requests []int64) (map[int64]lockHolder, error) {
	rows, err := p.q.Query(ctx, `SELECT l.request_id, l.pid, l.login::text, coalesce(nullif(a.application_name, ''), l.application),
		       CASE WHEN a.backend_start IS NULL THEN '' ELSE coalesce(host(a.client_addr), 'local socket') END,
		       a.backend_start
		FROM expiryctl.replay_runner_leases l JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
		WHERE l.request_id = ANY ($1)`, requests)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[int64]lockHolder{}
	for rows.Next() {
		var id int64
		var h lockHolder
		var since *time.Time
		if err := rows.Scan(&id, &h.pid, &h.login, &h.application, &h.address, &since); err != nil {
			return nil, err
		}
		if since != nil {
			h.since = *since
		}
		held[id] = h
	}
	return held, rows.Err()
}
