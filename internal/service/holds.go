package service

import (
	"context"

	"github.com/expiryctl/expiryctl/replay"
)

// HoldsGap reads the holds past their deadline at their source, the
// reservation database, with the policy's gap query: replay.ErrNoGapQuery
// when the policy sets none, a *replay.GapQueryError when the reservation
// database cannot answer. The summary and the metrics show it beside the
// archive's overdue letters, and carry on without it.
type HoldsGap func(ctx context.Context) (replay.HoldsGap, error)
