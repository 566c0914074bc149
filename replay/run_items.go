package replay

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// runItem is one frozen item of a request with its letter, as read for a
// run or a dry run.
type runItem struct {
	id              int64
	ordinal         int
	state           string
	frozenHash      []byte
	hash            []byte
	redacted        bool
	letterStatus    string
	reingested      bool
	reservationID   string
	idempotencyKey  string
	expectedVersion *int64
	hasOrigin       bool
	exchange        string
	routingKey      string
	originQueue     string
	contentType     string
	messageID       string
	properties      []byte // nil when the letter's were not recorded
	headers         json.RawMessage
	payload         []byte
	replayCount     int
}

// itemColumns reads items only through their request: every query that
// feeds the publisher is "WHERE i.request_id = <this request>".
const itemColumns = `i.request_id, i.dead_letter_id, i.ordinal, i.state, i.payload_sha256, d.payload_sha256,
	d.redacted_at IS NOT NULL, d.status, coalesce(again.found, false),
	coalesce(d.reservation_id, ''), coalesce(d.idempotency_key, ''), d.expected_version,
	d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL,
	coalesce(d.original_exchange, ''), coalesce(d.original_routing_key, ''), coalesce(d.origin_queue, ''),
	coalesce(d.content_type, ''), coalesce(d.message_id, ''), d.properties, d.headers, d.payload, d.replay_count`

// againJoin finds a newer letter of the same job (the letter died again
// since it was frozen). A lateral LIMIT 1 probes the partial index on
// previous_id per item; an EXISTS lets the planner hash the whole archive.
const againJoin = `LEFT JOIN LATERAL (SELECT true AS found FROM expiryctl.dead_letters n
		WHERE n.previous_id = d.id LIMIT 1) again ON true`

// letterByItem reads each item's letter by its primary key. The LIMIT keeps
// the subquery from being flattened into a join, which the planner, short of
// statistics on a freshly frozen request, may make a hash join over a read
// of the whole archive for every window.
const letterByItem = `CROSS JOIN LATERAL (SELECT * FROM expiryctl.dead_letters l
		WHERE l.id = i.dead_letter_id LIMIT 1) d`

// loadItems reads the items of request whose ordinals lie in [lo, hi], in
// ordinal order, in the given states (all states when none are given).
// Reading by an ordinal window rather than "after ordinal, LIMIT n" keeps
// each read bounded whatever plan the database picks: with the item table
// not yet analysed after a large request was frozen, the planner takes the
// (request, state, ordinal) index and, asked for the first n by ordinal,
// would read and sort every open item of the request for every chunk.
func loadItems(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, request int64, lo, hi int, states []string) ([]*runItem, error) {
	sql := `SELECT ` + itemColumns + ` FROM expiryctl.replay_items i
		` + letterByItem + `
		` + againJoin + `
		WHERE i.request_id = $1 AND i.ordinal BETWEEN $2 AND $3 AND (cardinality($4::text[]) = 0 OR i.state = ANY($4))
		ORDER BY i.ordinal`
	if states == nil {
		states = []string{}
	}
	rows, err := q.Query(ctx, sql, request, lo, hi, states)
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
		err := row.Scan(&req, &it.id, &it.ordinal, &it.state, &it.frozenHash, &it.hash, &it.redacted, &it.letterStatus,
			&it.reingested, &it.reservationID, &it.idempotencyKey, &it.expectedVersion, &it.hasOrigin, &it.exchange,
			&it.routingKey, &it.originQueue, &it.contentType, &it.messageID, &it.properties, &headers, &it.payload, &it.replayCount)
		it.headers = headers
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

// target is where a replay sends the item: its original exchange and routing
// key, else the queue it died in (through the default exchange), else the
// request's own target.
func (it *runItem) target(req Request) (exchange, key string, ok bool) {
	switch {
	case it.hasOrigin:
		return it.exchange, it.routingKey, true
	case it.originQueue != "":
		return "", it.originQueue, true
	case req.ToExchange != "" || req.ToRoutingKey != "":
		return req.ToExchange, req.ToRoutingKey, true
	}
	return "", "", false
}

// changed says how the letter changed since its request was frozen (as
// replay_cohort_changes does in the database), or "".
func (it *runItem) changed() string {
	switch {
	case it.redacted:
		return "redacted by retention"
	case string(it.hash) != string(it.frozenHash):
		return "payload changed since the cohort was frozen"
	case it.letterStatus == "discarded":
		return "discarded"
	case it.reingested:
		return "dead-lettered again since the cohort was frozen (a newer letter of the job exists)"
	}
	return ""
}

// depthQueue is the queue a replay of the item fills whose depth is the
// headroom stop condition: the target queue when the item is routed by
// queue name, else the queue it died in; "" when neither is known.
func (it *runItem) depthQueue(req Request) string {
	switch {
	case it.hasOrigin && it.exchange == "":
		return it.routingKey
	case it.hasOrigin || it.originQueue != "":
		return it.originQueue
	case req.ToExchange == "":
		return req.ToRoutingKey
	}
	return ""
}
