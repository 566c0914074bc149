package deadletter

import (
	"context"

	"github.com/expiryctl/expiryctl/store"
)

// StoreResult says what one batch insert did.
type StoreResult struct {
	// Stored is the number of letters inserted; the rest of the batch were
	// copies of letters already in the archive.
	Stored     int
	Duplicates int
	// FirstID and LastID bound the ids given to the stored letters.
	FirstID, LastID int64
}

// Insert stores letters as InsertAs does, recorded under the login's own
// name and the first letter's source queue.
func Insert(ctx context.Context, q store.Querier, letters []Letter) (StoreResult, error) {
	queue := ""
	if len(letters) > 0 {
		queue = letters[0].SourceQueue
	}
	return InsertAs(ctx, q, "", queue, letters)
}

// InsertAs stores letters through the schema's ingest_letters function, in
// one statement, with the batch's audit row (action dlq.ingest.batch, actor
// as the label beside the login, target the queue). A letter whose
// fingerprint is already archived (a redelivery, or the duplicate a worker
// crash can leave) is skipped; a letter of a job already archived links to
// that job's latest row. The database hashes each payload itself.
func InsertAs(ctx context.Context, q store.Querier, actor, queue string, letters []Letter) (StoreResult, error) {
	return insertBatch(ctx, newPostgresLetters(q), actor, queue, letters)
}

// insertBatch stores letters through s and says what it stored.
func insertBatch(ctx context.Context, s letterStore, actor, queue string, letters []Letter) (StoreResult, error) {
	ids, err := s.LetterInsertBatch(ctx, actor, queue, letters)
	if err != nil {
		return StoreResult{}, err
	}
	res := StoreResult{Stored: len(ids), Duplicates: len(letters) - len(ids)}
	for i, id := range ids {
		if i == 0 || id < res.FirstID {
			res.FirstID = id
		}
		res.LastID = max(res.LastID, id)
	}
	return res, nil
}
