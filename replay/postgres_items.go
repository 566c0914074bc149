package replay

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// The reads below that join dead_letters (deadletter's table) do so only
// to read each item with its letter in one snapshot: the runner's items
// with the bytes it will publish, and the approver's view of the cohort.
// Nothing here writes dead_letters; the schema's functions that decide an
// item change its letter's status (dead_letter_states) in the same
// transaction.

// itemColumns reads items only through their request: every query that
// feeds the publisher is "WHERE i.request_id = <this request>".
const itemColumns = `i.request_id, i.dead_letter_id, i.ordinal, i.state, i.payload_sha256, d.payload_sha256,
	d.redacted_at IS NOT NULL, d.status, coalesce(again.found, false),
	coalesce(d.reservation_id, ''), coalesce(d.idempotency_key, ''), d.expected_version,
	t.rk IS NOT NULL, coalesce(t.e, ''), coalesce(t.rk, ''), coalesce(d.origin_queue, ''),
	coalesce(d.content_type, ''), coalesce(d.message_id, ''), d.properties, d.headers, d.payload, d.replay_count,
	greatest(extract(epoch FROM w.not_before - clock_timestamp()), 0)::float8,
	d.source_system, coalesce(d.native->>'MessageGroupId', ''),
	coalesce(d.native->>'job_id', ''), coalesce(d.native->>'incarnation', ''),
	expiryctl.replay_retries_in_place(d.source_system)`

// againJoin finds a newer letter of the same job (the letter died again
// since it was frozen). A lateral LIMIT 1 probes the partial index on
// previous_id per item; an EXISTS lets the planner hash the whole archive.
const againJoin = `LEFT JOIN LATERAL (SELECT true AS found FROM expiryctl.dead_letters n
		WHERE n.previous_id = d.id LIMIT 1) again ON true`

// letterByItem reads each item's letter, with its status, by their primary
// keys. The LIMIT keeps the subquery from being flattened into a join, which
// the planner, short of statistics on a freshly frozen request, may make a
// hash join over a read of the whole archive for every window.
const letterByItem = `CROSS JOIN LATERAL (SELECT l.*, s.status FROM expiryctl.dead_letters l
		JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = l.id
		WHERE l.id = i.dead_letter_id LIMIT 1) d`

// targetByItem is where the item goes, as the request froze its cohort's
// targets (replay_target_of, one definition for both), and, as w, the
// earliest time it may go (replay_item_not_before).
const targetByItem = `JOIN expiryctl.replay_requests r ON r.id = i.request_id
		CROSS JOIN LATERAL expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
			r.to_exchange, r.to_routing_key, r.via_exchange) t
		CROSS JOIN LATERAL (SELECT expiryctl.replay_item_not_before(r.not_before, r.include_not_due, i.retry_after, d.due_at) AS not_before) w`

// ItemsLoad reads by an ordinal window rather than "after ordinal, LIMIT n",
// which keeps each read bounded whatever plan the database picks: with the
// item table not yet analysed after a large request was frozen, the planner
// takes the (request, state, ordinal) index and, asked for the first n by
// ordinal, would read and sort every open item of the request for every
// chunk.
func (p postgresTables) ItemsLoad(ctx context.Context, request int64, lo, hi int, states []string) ([]*runItem, error) {
	sql := `SELECT ` + itemColumns + ` FROM expiryctl.replay_items i
		` + letterByItem + `
		` + targetByItem + `
		` + againJoin + `
		WHERE i.request_id = $1 AND i.ordinal BETWEEN $2 AND $3 AND (cardinality($4::text[]) = 0 OR i.state = ANY($4))
		ORDER BY i.ordinal`
	if states == nil {
		states = []string{}
	}
	rows, err := p.q.Query(ctx, sql, request, lo, hi, states)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*runItem, error) {
		it := &runItem{}
		var req int64
		// Headers are read as plain bytes: scanned into a json.RawMessage,
		// pgx would validate them through encoding/json, and replayHeaders
		// decodes them anyway.
		var headers []byte
		var wait float64
		err := row.Scan(&req, &it.id, &it.ordinal, &it.state, &it.frozenHash, &it.hash, &it.redacted, &it.letterStatus,
			&it.reingested, &it.reservationID, &it.idempotencyKey, &it.expectedVersion, &it.hasTarget, &it.exchange,
			&it.routingKey, &it.originQueue, &it.contentType, &it.messageID, &it.properties, &headers, &it.payload, &it.replayCount,
			&wait, &it.system, &it.groupID, &it.job.ID, &it.job.Incarnation, &it.inPlace)
		it.headers = headers
		if wait > 0 {
			// The database's answer is a wait, not a time: the runner's
			// clock may differ from the one replay_items_send checks.
			it.notBefore = time.Now().Add(time.Duration(wait * float64(time.Second)))
		}
		// The hash of the bytes about to be published, not the stored
		// column: a payload changed behind the archive's back is refused
		// item by item (changed says so), whatever the columns claim.
		sum := sha256.Sum256(it.payload)
		it.hash = sum[:]
		if err == nil && req != request {
			// Cannot happen with the WHERE above; checked because publishing
			// an item of another request would break the approval.
			err = fmt.Errorf("item %d belongs to request %d, not %d: refusing to publish it", it.id, req, request)
		}
		return it, err
	})
}

func (p postgresTables) ItemsMaxOrdinal(ctx context.Context, request int64) (int, error) {
	var n int
	err := p.q.QueryRow(ctx, `SELECT coalesce(max(ordinal), -1) FROM expiryctl.replay_items WHERE request_id = $1`, request).Scan(&n)
	return n, err
}

func (p postgresTables) ItemsCount(ctx context.Context, request int64) (int, error) {
	var n int
	err := p.q.QueryRow(ctx, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1`, request).Scan(&n)
	return n, err
}

func (p postgresTables) ItemsCountByState(ctx context.Context, request int64) (map[string]int, error) {
	rows, err := p.q.Query(ctx, `SELECT state, count(*) FROM expiryctl.replay_items WHERE request_id = $1 GROUP BY state`, request)
	if err != nil {
		return nil, err
	}
	states := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, err
		}
		states[s] = n
	}
	return states, rows.Err()
}

func (p postgresTables) ItemsCountByCategoryAndState(ctx context.Context, request int64) (map[deadletter.Category]int, map[string]int, error) {
	rows, err := p.q.Query(ctx, `SELECT d.reason_category, i.state, count(*) FROM expiryctl.replay_items i
		JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id WHERE i.request_id = $1 GROUP BY 1, 2`, request)
	if err != nil {
		return nil, nil, err
	}
	categories, states := map[deadletter.Category]int{}, map[string]int{}
	for rows.Next() {
		var c deadletter.Category
		var state string
		var n int
		if err := rows.Scan(&c, &state, &n); err != nil {
			rows.Close()
			return nil, nil, err
		}
		categories[c] += n
		states[state] += n
	}
	return categories, states, rows.Err()
}

func (p postgresTables) ItemsNotConfirmed(ctx context.Context, request int64) ([]ItemOutcome, error) {
	rows, err := p.q.Query(ctx, `SELECT dead_letter_id, state, coalesce(last_error, '') FROM expiryctl.replay_items
		WHERE request_id = $1 AND state <> 'confirmed' ORDER BY ordinal`, request)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ItemOutcome])
}

func (p postgresTables) ItemsSample(ctx context.Context, req Request, limit int) ([]Item, error) {
	bound := any(nil)
	if limit > 0 {
		bound = limit
	}
	rows, err := p.q.Query(ctx, `SELECT i.dead_letter_id, i.ordinal, encode(i.payload_sha256, 'hex'), i.state, i.attempts,
		coalesce(i.last_error, ''), d.reason_category, coalesce(d.reservation_id, ''), coalesce(d.error_class, ''),
		CASE WHEN t.rk IS NULL THEN 'none'
		     WHEN t.e = '' THEN 'queue ' || t.rk
		     ELSE 'exchange ' || t.e || ' key ' || t.rk END
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		`+targetByItem+`
		WHERE i.request_id = $1 ORDER BY i.ordinal LIMIT $2`, req.ID, bound)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		err := row.Scan(&it.DeadLetterID, &it.Ordinal, &it.PayloadSHA256, &it.State, &it.Attempts, &it.LastError,
			&it.Category, &it.ReservationID, &it.ErrorClass, &it.Target)
		return it, err
	})
}

func (p postgresTables) RunWatchedQueues(ctx context.Context, request int64) ([]string, error) {
	rows, err := p.q.Query(ctx, `SELECT q FROM expiryctl.replay_watched_queues($1) AS q`, request)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (p postgresTables) ItemsTiming(ctx context.Context, request int64) (Timing, error) {
	var t Timing
	err := p.q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE d.due_at <= now()), count(*) FILTER (WHERE d.due_at > now()),
		count(*) FILTER (WHERE d.due_at IS NULL), min(d.due_at), max(d.due_at),
		count(*) FILTER (WHERE i.retry_after > now()), max(i.retry_after) FILTER (WHERE i.retry_after > now()),
		count(*) FILTER (WHERE w.not_before > now() AND i.state IN ('pending', 'publishing')),
		max(w.not_before) FILTER (WHERE w.not_before > now() AND i.state IN ('pending', 'publishing'))
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		`+targetByItem+`
		WHERE i.request_id = $1`, request).Scan(&t.PastDue, &t.NotYetDue, &t.NoDueAt, &t.DueFrom, &t.DueTo,
		&t.RetryAfter, &t.RetryAfterUntil, &t.Held, &t.HeldUntil)
	return t, err
}

func (p postgresTables) ItemsPropertyNotes(ctx context.Context, request int64) (PropertyNotes, error) {
	notes := PropertyNotes{UserIDs: map[string]int{}}
	// Only a routed system's letters have wire properties; another's
	// attributes go back as they came.
	// The user_id is read back through DecodeProperties, which undoes the
	// tag a user_id that is not plain UTF-8 is stored with.
	rows, err := p.q.Query(ctx, `SELECT d.properties IS NULL,
		       d.properties IS NOT NULL AND coalesce(d.properties->>'delivery_mode', '') <> '2',
		       CASE WHEN d.properties ? 'user_id' THEN jsonb_build_object('user_id', d.properties->'user_id')::text END,
		       count(*)
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		WHERE i.request_id = $1 AND d.source_system = 'rabbitmq' GROUP BY 1, 2, 3`, request)
	if err != nil {
		return PropertyNotes{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var missing, transient bool
		var user *string
		var n int
		if err := rows.Scan(&missing, &transient, &user, &n); err != nil {
			return PropertyNotes{}, err
		}
		if missing {
			notes.NotRecorded += n
		}
		if transient {
			notes.MadePersistent += n
		}
		if user != nil {
			props, err := deadletter.DecodeProperties([]byte(*user))
			if err != nil {
				return PropertyNotes{}, err
			}
			notes.UserIDs[props.UserID] += n
		}
	}
	return notes, rows.Err()
}

func (p postgresTables) ItemsCohortChanges(ctx context.Context, request int64) ([]CohortChange, error) {
	rows, err := p.q.Query(ctx, `SELECT dead_letter_id, change FROM expiryctl.replay_cohort_changes($1) ORDER BY 1`, request)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[CohortChange])
}

func (p postgresTables) ItemsDecided(ctx context.Context, each func(request, letter int64, state string)) error {
	rows, err := p.q.Query(ctx, `SELECT request_id, dead_letter_id, state FROM expiryctl.replay_items
		WHERE state IN ('confirmed', 'skipped', 'failed')`)
	if err != nil {
		return fmt.Errorf("read the replay items: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var req, letter int64
		var state string
		if err := rows.Scan(&req, &letter, &state); err != nil {
			return fmt.Errorf("read the replay items: %w", err)
		}
		each(req, letter, state)
	}
	return rows.Err()
}

// ItemsMark names the ordinal range too, so that the function's updates
// read the window's rows by index, not every item of a large request. It
// commits the window's decisions in one statement unless the request
// stopped running (a cancel).
func (p postgresTables) ItemsMark(ctx context.Context, request int64, m itemMarks) (Status, error) {
	var status Status
	err := p.q.QueryRow(ctx, `SELECT expiryctl.replay_items_mark($1, $2, $3, $4, $5, $6, $7, $8)`,
		request, m.lo, m.hi, nonNil(m.publish), nonNil(m.skip), nonNilText(m.skipWhy), nonNil(m.fail), nonNilText(m.failWhy)).Scan(&status)
	if err != nil {
		return "", asRefusal(err)
	}
	return stoppedUnless(status, StatusRunning), nil
}

// ItemsSend names the ordinal range too, as ItemsMark does, so that the
// function's update reads the group's rows by index.
func (p postgresTables) ItemsSend(ctx context.Context, request int64, lo, hi int, items []int64, delayed bool) (Status, error) {
	var status Status
	err := p.q.QueryRow(ctx, `SELECT expiryctl.replay_items_send($1, $2, $3, $4, $5)`, request, lo, hi, nonNil(items), delayed).Scan(&status)
	if err != nil {
		return "", asRefusal(err)
	}
	return stoppedUnless(status, StatusRunning), nil
}

// ItemsRecord finds items by the batch's ordinal range and an id list,
// never by joining an unnest: the items table is rarely analysed during a
// run, and a cached generic plan then joins the unnest by nested loop, a
// thousand comparisons per item. replay_items_record writes confirms (and
// the letters replayed) and failures in one statement; a confirm only of an
// item publishing.
func (p postgresTables) ItemsRecord(ctx context.Context, request int64, lo, hi int, confirmed, failed []int64, failedWhy []string) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_items_record($1, $2, $3, $4, $5, $6)`,
		request, lo, hi, nonNil(confirmed), nonNil(failed), nonNilText(failedWhy))
	return asRefusal(err)
}
