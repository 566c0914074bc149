package replay

import (
	"context"
	"fmt"
)

func (p postgresTables) RequestTally(ctx context.Context) (Tally, error) {
	rows, err := p.q.Query(ctx, `SELECT r.id, r.status, i.state, count(*)
		FROM expiryctl.replay_requests r
		JOIN expiryctl.replay_items i ON i.request_id = r.id
		WHERE r.status IN ('pending', 'approved', 'running', 'halted')
		GROUP BY r.id, r.status, i.state`)
	if err != nil {
		return Tally{}, fmt.Errorf("count the open requests' items: %w", err)
	}
	t := Tally{Open: map[Status]map[string]int64{}, Requests: map[int64]RequestItems{}}
	for rows.Next() {
		var id int64
		var status Status
		var state string
		var n int64
		if err := rows.Scan(&id, &status, &state, &n); err != nil {
			rows.Close()
			return Tally{}, fmt.Errorf("count the open requests' items: %w", err)
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
		return Tally{}, fmt.Errorf("count the open requests' items: %w", err)
	}
	if err := p.q.QueryRow(ctx, `SELECT count(*) FROM expiryctl.replay_items WHERE state = 'confirmed'`).Scan(&t.Published); err != nil {
		return Tally{}, fmt.Errorf("count the published items: %w", err)
	}
	return t, nil
}
