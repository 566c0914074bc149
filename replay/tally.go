package replay

import "context"

// Tally is what the replay tables hold, in numbers, for a monitoring
// system: no request ids, so its size does not grow with the history.
type Tally struct {
	// Open counts the items of the open requests (pending, approved,
	// running, halted) by their request's status, then by their own state.
	Open map[Status]map[string]int64
	// Published counts the items the broker confirmed, of every request
	// ever run. An item is confirmed once and stays so, so it only grows.
	Published int64
}

// Tally counts the open requests' items and the items ever published. It
// neither writes nor audits: it serves `expiryctl metrics serve`, which
// records one audit row when it starts and then refreshes on a timer. The
// open requests' items are read through their requests' primary key,
// bounded by the open cohorts; the published count reads every item, so
// it is for a snapshot taken every few seconds, not for each scrape.
func (s *Service) Tally(ctx context.Context) (Tally, error) {
	return s.tables().RequestTally(ctx)
}
