package audit

import (
	"context"
	"encoding/json"

	"github.com/expiryctl/expiryctl/store"
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
	return newPostgresTrail(q).AuditEvents(ctx, governanceActions)
}

// CountEvents counts the governance events of one action by the value of
// one key of their details ("" where a row has none), for a monitoring
// system: the replay halts by condition, say. The action's rows are found
// through the trail's action index, so the cost follows how many such
// events there are, not the trail's length.
func CountEvents(ctx context.Context, q store.Querier, action, detailKey string) (map[string]int64, error) {
	return newPostgresTrail(q).AuditEventCounts(ctx, action, detailKey)
}
