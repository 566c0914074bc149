package deadletter

import (
	"context"

	"github.com/expiryctl/expiryctl/store"
)

// CountRedeadLettered counts the letters captured with an x-replay-request
// header naming requestID: jobs that a replay of that request put back on
// the queue and that were dead-lettered again (ingest records the header as
// the letter's replay request). It is the number behind replay's
// redead-ratio stop condition, and it lives here because dead_letters is
// this package's table: replay reads it through this function rather than
// with SQL of its own. q may be a pool or a transaction, so that a runner
// can read it in the same snapshot as its own tables.
func CountRedeadLettered(ctx context.Context, q store.Querier, requestID int64) (int, error) {
	return newPostgresLetters(q).LetterCountRedead(ctx, requestID)
}

// CountRedeadLetteredOf is CountRedeadLettered for several requests in one
// read, for a list of them; a request none of whose jobs came back is not
// in the map.
func CountRedeadLetteredOf(ctx context.Context, q store.Querier, requests []int64) (map[int64]int, error) {
	return newPostgresLetters(q).LetterCountRedeadOf(ctx, requests)
}
