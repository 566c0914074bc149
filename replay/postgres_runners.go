package replay

import (
	"context"
	"time"
)

// RunLockHolders reads pg_locks, which every login may read, for the
// sessions holding the runner locks of requests in this database. Only the
// pid, login and application name of another login's session are visible
// to a login without pg_read_all_stats (pg_stat_activity hides the rest as
// NULL), so address and since are left empty when hidden; a visible
// session without a client address came over the local socket.
func (p postgresTables) RunLockHolders(ctx context.Context, requests []int64) (map[int64]lockHolder, error) {
	keys := make([]int64, len(requests))
	byKey := make(map[int64][]int64, len(requests))
	for i, id := range requests {
		keys[i] = runLockKey(id)
		byKey[keys[i]] = append(byKey[keys[i]], id)
	}
	rows, err := p.q.Query(ctx, `SELECT l.objid::int8, l.pid, coalesce(a.usename::text, ''), coalesce(a.application_name, ''),
		       CASE WHEN a.backend_start IS NULL THEN '' ELSE coalesce(host(a.client_addr), 'local socket') END,
		       a.backend_start
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.classid::int8 = $1 AND l.objid::int8 = ANY ($2)`, int64(uint32(runLockNamespace)), keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[int64]lockHolder{}
	for rows.Next() {
		var key int64
		var h lockHolder
		var since *time.Time
		if err := rows.Scan(&key, &h.pid, &h.login, &h.application, &h.address, &since); err != nil {
			return nil, err
		}
		if since != nil {
			h.since = *since
		}
		for _, id := range byKey[key] {
			held[id] = h
		}
	}
	return held, rows.Err()
}

// runLockKey is the second key of a request's runner lock as pg_locks
// shows it: the request id's low 32 bits, unsigned (objid is an oid).
func runLockKey(request int64) int64 { return int64(uint32(int32(request))) }
