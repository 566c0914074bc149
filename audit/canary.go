package audit

import (
	"context"
	"time"

	"github.com/expiryctl/expiryctl/store"
)

// The canary of a replay leaves no state but the trail: replay_canary_record
// writes its start and its pass as audit rows, and only that function can
// write them "ok" (audit_append refuses to), so a forged row cannot shorten
// or skip the canary. The runner reads them through these two functions, in
// its own snapshot (q may be a transaction).

// CanaryPassed reports whether the canary of target's approval number
// approval has passed.
func CanaryPassed(ctx context.Context, q store.Querier, target string, approval int) (bool, error) {
	return newPostgresTrail(q).AuditCanaryPassed(ctx, target, approval)
}

// CanaryStarted returns how long ago, by the database's clock, the canary of
// target's approval number approval started, or nil when it has not.
func CanaryStarted(ctx context.Context, q store.Querier, target string, approval int) (*time.Duration, error) {
	return newPostgresTrail(q).AuditCanaryStarted(ctx, target, approval)
}
