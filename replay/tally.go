package replay

import (
	"context"

	"github.com/expiryctl/expiryctl/audit"
)

// Tally is what the replay tables hold, in numbers, for a monitoring
// system. It names only the open requests, so its size follows how many
// are open, not the history.
type Tally struct {
	// Open counts the items of the open requests (pending, approved,
	// running, halted) by their request's status, then by their own state.
	Open map[Status]map[string]int64
	// Requests are the same items by open request.
	Requests map[int64]RequestItems
	// Published counts the items the broker confirmed, of every request
	// ever run. An item is confirmed once and stays so, so it only grows.
	Published int64
	// Halts counts the runs halted by a stop condition, of every request
	// ever run, by condition (failure-ratio, queue-depth, …); it only grows.
	Halts map[string]int64
}

// RequestItems are one open request's items by state.
type RequestItems struct {
	Status Status
	States map[string]int64
}

// Tally counts the open requests' items and the items ever published. It
// neither writes nor audits: it serves `expiryctl metrics serve`, which
// records one audit row when it starts and then refreshes on a timer. The
// open requests' items are read through their requests' primary key,
// bounded by the open cohorts; the published count reads every item, so
// it is for a snapshot taken every few seconds, not for each scrape.
func (s *Service) Tally(ctx context.Context) (Tally, error) {
	t, err := s.tables().RequestTally(ctx)
	if err != nil {
		return t, err
	}
	// A halt is a governance event the database writes in the transaction
	// that halts; a request halted, re-approved and run again keeps no
	// other trace of its earlier halt.
	if t.Halts, err = audit.CountEvents(ctx, s.Pool, "replay.halt", "condition"); err != nil {
		return t, err
	}
	return t, nil
}
