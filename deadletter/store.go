package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/store"
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
	n := len(letters)
	var (
		fingerprints    = make([][]byte, n)
		jobKeys         = make([]*string, n)
		messageIDs      = make([]*string, n)
		reservationIDs  = make([]*string, n)
		idempotencyKeys = make([]*string, n)
		versions        = make([]*int64, n)
		dueAts          = make([]*time.Time, n)
		sourceQueues    = make([]string, n)
		originQueues    = make([]*string, n)
		exchanges       = make([]*string, n)
		routingKeys     = make([]*string, n)
		categories      = make([]string, n)
		errorClasses    = make([]*string, n)
		lastErrors      = make([]*string, n)
		attempts        = make([]int32, n)
		histories       = make([]string, n)
		headers         = make([]string, n)
		contentTypes    = make([]*string, n)
		payloads        = make([][]byte, n)
		deadAts         = make([]time.Time, n)
		replayRequests  = make([]*int64, n)
		replayCounts    = make([]int32, n)
		properties      = make([]*string, n)
	)
	for i := range letters {
		l := &letters[i]
		fingerprints[i] = l.Fingerprint[:]
		jobKeys[i] = nullable(l.JobKey)
		messageIDs[i] = nullable(l.MessageID)
		reservationIDs[i] = nullable(l.ReservationID)
		idempotencyKeys[i] = nullable(l.IdempotencyKey)
		versions[i] = l.ExpectedVersion
		dueAts[i] = l.DueAt
		sourceQueues[i] = l.SourceQueue
		originQueues[i] = nullable(l.OriginQueue)
		exchanges[i] = nullable(l.OriginalExchange)
		routingKeys[i] = nullable(l.OriginalRoutingKey)
		categories[i] = string(l.Category)
		errorClasses[i] = nullable(l.ErrorClass)
		lastErrors[i] = nullable(l.LastError)
		attempts[i] = int32(min(l.Attempts, 1<<31-1))
		history, err := json.Marshal(l.AttemptHistory)
		if err != nil {
			return StoreResult{}, fmt.Errorf("encode attempt history: %w", err)
		}
		if l.AttemptHistory == nil {
			history = []byte("[]")
		}
		histories[i] = string(history)
		headers[i] = string(l.Headers)
		if len(l.Headers) == 0 {
			headers[i] = "{}"
		}
		contentTypes[i] = nullable(l.ContentType)
		payloads[i] = l.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		deadAts[i] = l.DeadLetteredAt
		replayRequests[i] = l.ReplayRequestID
		replayCounts[i] = int32(min(l.ReplayCount, 1<<31-1))
		if l.Properties != nil {
			p := string(EncodeProperties(*l.Properties))
			properties[i] = &p
		}
	}

	// The column arrays travel in one round trip; ON CONFLICT on the
	// fingerprint makes redelivery a no-op, also for two copies inside the
	// same batch.
	rows, err := q.Query(ctx, `SELECT expiryctl.ingest_letters($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
			$14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)`,
		actor, queue, fingerprints, jobKeys, messageIDs, reservationIDs, idempotencyKeys, versions, dueAts,
		sourceQueues, originQueues, exchanges, routingKeys, categories, errorClasses, lastErrors, attempts,
		histories, headers, contentTypes, payloads, deadAts, replayRequests, replayCounts, properties)
	if err != nil {
		return StoreResult{}, store.AsRefusal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return StoreResult{}, err
	}
	res := StoreResult{Stored: len(ids), Duplicates: n - len(ids)}
	for i, id := range ids {
		if i == 0 || id < res.FirstID {
			res.FirstID = id
		}
		res.LastID = max(res.LastID, id)
	}
	return res, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
