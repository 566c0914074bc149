package replay

import (
	"context"
	"sync"

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
	// Fates, for a replay that confirmed items, says how many came back,
	// settled or are unknown; nil otherwise.
	Fates *Fates
}

// Tally counts the open requests' items and the items ever published. It
// neither writes nor audits. It counts every ended request's confirmed
// items, so it reads the whole replay history: a caller that tallies on a
// timer uses a Tallier, which reads each ended request once.
func (s *Service) Tally(ctx context.Context) (Tally, error) {
	return (&Tallier{Service: s}).Tally(ctx)
}

// Tallier is the Service for a reader that tallies again and again:
// `expiryctl metrics serve`, which records one audit row when it starts and
// then refreshes on a timer. An ended request's confirmed items can no
// longer change, so a Tallier counts them once and remembers their sum;
// each Tally then reads the open requests' items through their requests'
// primary key, and the items of the requests that ended since the last
// Tally, not the history. Its methods are safe for concurrent use.
type Tallier struct {
	*Service

	mu sync.Mutex
	// counted are the ended requests whose confirmed items are in
	// endedConfirmed.
	counted        []int64
	endedConfirmed int64
}

// Tally is Service.Tally, reading only what changed since the last.
func (t *Tallier) Tally(ctx context.Context) (Tally, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var tally Tally
	var ended map[int64]int64
	err := inReadOnlyTx(ctx, t.Pool, func(tb tables) error {
		var err error
		tally, ended, err = tb.RequestTally(ctx, t.counted)
		return err
	})
	if err != nil {
		return tally, err
	}
	if err := tallyFates(ctx, t.tables(), tally.Requests); err != nil {
		return tally, err
	}
	// A halt is a governance event the database writes in the transaction
	// that halts; a request halted, re-approved and run again keeps no
	// other trace of its earlier halt.
	if tally.Halts, err = audit.CountEvents(ctx, t.Pool, "replay.halt", "condition"); err != nil {
		return tally, err
	}
	for id, n := range ended {
		t.counted = append(t.counted, id)
		t.endedConfirmed += n
	}
	tally.Published += t.endedConfirmed
	return tally, nil
}

// tallyFates fills in the Fates of the open requests that confirmed items.
func tallyFates(ctx context.Context, t tables, requests map[int64]RequestItems) error {
	var ran []int64
	for id, r := range requests {
		if r.States["confirmed"] > 0 {
			ran = append(ran, id)
		}
	}
	if len(ran) == 0 {
		return nil
	}
	fates, err := t.RequestFates(ctx, ran)
	if err != nil {
		return err
	}
	for id, f := range fates {
		r := requests[id]
		r.Fates = &f
		requests[id] = r
	}
	return nil
}
