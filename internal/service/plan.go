package service

import (
	"context"

	"github.com/expiryctl/expiryctl/replay"
)

// Planner sizes a replay request's rate against the consumers' headroom
// (`replay plan`, and the plan under `replay show`), measuring with the
// queue system's live view and the archive. *replay.Service's Plan, given
// the live view as its replay.Flow, implements it; every plan records
// replay.plan. A live view that cannot be read is not an error: the
// plan's Unavailable says what is missing.
type Planner interface {
	Plan(ctx context.Context, id int64, opts replay.PlanOptions) (replay.Plan, error)
}
