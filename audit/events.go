package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// Event is a governance row of the trail: a state change that one of the
// database's own functions wrote, in the transaction that made it. A
// client cannot write such a row (audit_append reserves these actions'
// "ok" outcome), so each is evidence that the change went through the rules.
type Event struct {
	Seq     int64
	Action  string
	Target  string
	Actor   string
	DBRole  string
	Details json.RawMessage
}

// governanceActions are the state changes GovernanceEvents returns.
var governanceActions = []string{"replay.request", "replay.approve", "replay.reject", "replay.cancel", "replay.expire",
	"replay.run.start", "replay.run.interrupted", "replay.run.cancelled", "replay.halt", "replay.canary.start",
	"replay.canary.pass", "replay.complete", "policy.set", "policy.propose", "policy.approve", "policy.reject",
	"access.grant", "access.revoke"}

// GovernanceEvents returns every governance event of the trail, oldest
// first.
func GovernanceEvents(ctx context.Context, q store.Querier) ([]Event, error) {
	rows, err := q.Query(ctx, `SELECT seq, action, target, actor, db_role, details::text FROM expiryctl.audit_log
		WHERE outcome = 'ok' AND action = ANY ($1) ORDER BY seq`, governanceActions)
	if err != nil {
		return nil, fmt.Errorf("read the trail's governance events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var details string
		if err := rows.Scan(&e.Seq, &e.Action, &e.Target, &e.Actor, &e.DBRole, &details); err != nil {
			return nil, fmt.Errorf("read the trail's governance events: %w", err)
		}
		e.Details = json.RawMessage(details)
		out = append(out, e)
	}
	return out, rows.Err()
}
