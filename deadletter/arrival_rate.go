package deadletter

import (
	"context"

	"github.com/expiryctl/expiryctl/store"
)

// RecentArrivals counts the letters of every category dead-lettered in the
// five minutes before the database's clock, from the same query as the
// summary's arrivals (an hour of an index at most). It writes no audit
// row: it is for replay's plan, which records its own. q may be a pool or
// a transaction.
func RecentArrivals(ctx context.Context, q store.Querier) (ArrivalWindow, error) {
	letters := newPostgresLetters(q)
	end, err := letters.LetterClock(ctx)
	if err != nil {
		return ArrivalWindow{}, err
	}
	tallies, err := letters.LetterArrivals(ctx, end)
	if err != nil {
		return ArrivalWindow{}, err
	}
	w := ArrivalWindow{WindowSeconds: int64(shortWindow.Seconds())}
	for _, t := range tallies {
		w.Letters += t.Last5m
	}
	w.PerMinute = float64(w.Letters) / shortWindow.Minutes()
	return w, nil
}
