package replay

import (
	"context"
	"fmt"
)

func (p postgresTables) RequestTally(ctx context.Context, counted []int64) (Tally, map[int64]int64, error) {
	var open []string
	for _, s := range Statuses() {
		if (Request{Status: s}).Open() {
			open = append(open, string(s))
		}
	}
	if counted == nil {
		counted = []int64{}
	}
	// The planner costs each request at the average request's size and,
	// past a few requests, compiles the statement with JIT first: 0.3 s
	// for reads of a few milliseconds. Only a transaction's own setting
	// is changed (the caller's, or none on a pool, where it is a no-op).
	if _, err := p.q.Exec(ctx, `SELECT set_config('jit', 'off', true)`); err != nil {
		return Tally{}, nil, fmt.Errorf("count the requests' items: %w", err)
	}
	// One statement, so one snapshot: a request that ends meanwhile is
	// counted once, open or ended, and the published total never goes
	// back. Each request's items are read through its key, request by
	// request (a lateral subquery, so that a join does not become a scan
	// of every item ever replayed); the caller names the ended requests it
	// has counted already, whose items can no longer change.
	rows, err := p.q.Query(ctx, `SELECT r.id, r.status, c.state, c.n
		FROM expiryctl.replay_requests r
		CROSS JOIN LATERAL (SELECT i.state, count(*) AS n FROM expiryctl.replay_items i
			WHERE i.request_id = r.id GROUP BY i.state) c
		WHERE r.status = ANY($1)
		UNION ALL
		SELECT r.id, r.status, 'confirmed',
			(SELECT count(*) FROM expiryctl.replay_items i WHERE i.request_id = r.id AND i.state = 'confirmed')
		FROM expiryctl.replay_requests r
		WHERE r.status <> ALL($1) AND r.id <> ALL($2)`, open, counted)
	if err != nil {
		return Tally{}, nil, fmt.Errorf("count the requests' items: %w", err)
	}
	t := Tally{Open: map[Status]map[string]int64{}, Requests: map[int64]RequestItems{}}
	ended := map[int64]int64{}
	for rows.Next() {
		var id int64
		var status Status
		var state string
		var n int64
		if err := rows.Scan(&id, &status, &state, &n); err != nil {
			rows.Close()
			return Tally{}, nil, fmt.Errorf("count the requests' items: %w", err)
		}
		if !(Request{Status: status}).Open() {
			ended[id] = n
			continue
		}
		if state == "confirmed" {
			t.Published += n
		}
		if t.Open[status] == nil {
			t.Open[status] = map[string]int64{}
		}
		t.Open[status][state] += n
		r, ok := t.Requests[id]
		if !ok {
			r = RequestItems{Status: status, States: map[string]int64{}}
		}
		r.States[state] = n
		t.Requests[id] = r
	}
	if err := rows.Err(); err != nil {
		return Tally{}, nil, fmt.Errorf("count the requests' items: %w", err)
	}
	return t, ended, nil
}
