package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// Insert stores letters in one statement inside tx. A letter whose
// fingerprint is already archived (a redelivery, or the duplicate a worker
// crash can leave) is skipped; a letter of a job already archived links to
// that job's latest row.
func Insert(ctx context.Context, tx pgx.Tx, letters []Letter) (StoreResult, error) {
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
		payloadHashes   = make([][]byte, n)
		deadAts         = make([]time.Time, n)
		replayRequests  = make([]*int64, n)
		replayCounts    = make([]int32, n)
		ordinals        = make([]int32, n)
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
		payloadHashes[i] = l.PayloadHash[:]
		deadAts[i] = l.DeadLetteredAt
		replayRequests[i] = l.ReplayRequestID
		replayCounts[i] = int32(min(l.ReplayCount, 1<<31-1))
		ordinals[i] = int32(i)
	}

	// unnest() turns the column arrays back into rows in one round trip;
	// ON CONFLICT on the fingerprint makes redelivery a no-op, also for two
	// copies inside the same batch.
	rows, err := tx.Query(ctx, `
		INSERT INTO expiryctl.dead_letters (
			fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
			source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
			error_class, last_error, attempts, attempt_history, headers, content_type, payload,
			payload_sha256, payload_size, dead_lettered_at, replay_request_id, replay_count, previous_id)
		SELECT s.fingerprint, s.job_key, s.message_id, s.reservation_id, s.idempotency_key, s.expected_version, s.due_at,
			s.source_queue, s.origin_queue, s.original_exchange, s.original_routing_key, s.reason_category,
			s.error_class, s.last_error, s.attempts, s.attempt_history::jsonb, s.headers::jsonb, s.content_type, s.payload,
			s.payload_sha256, length(s.payload), s.dead_lettered_at, s.replay_request_id, s.replay_count,
			CASE WHEN s.job_key IS NOT NULL THEN
				(SELECT d.id FROM expiryctl.dead_letters d WHERE d.job_key = s.job_key ORDER BY d.id DESC LIMIT 1)
			END
		FROM unnest($1::bytea[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[],
			$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::int[],
			$16::text[], $17::text[], $18::text[], $19::bytea[], $20::bytea[], $21::timestamptz[], $22::bigint[],
			$23::int[], $24::int[])
			AS s(fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
			source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
			error_class, last_error, attempts, attempt_history, headers, content_type, payload,
			payload_sha256, dead_lettered_at, replay_request_id, replay_count, ordinal)
		ORDER BY s.ordinal
		ON CONFLICT (fingerprint) DO NOTHING
		RETURNING id`,
		fingerprints, jobKeys, messageIDs, reservationIDs, idempotencyKeys, versions, dueAts,
		sourceQueues, originQueues, exchanges, routingKeys, categories, errorClasses, lastErrors, attempts,
		histories, headers, contentTypes, payloads, payloadHashes, deadAts, replayRequests, replayCounts, ordinals)
	if err != nil {
		return StoreResult{}, err
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
