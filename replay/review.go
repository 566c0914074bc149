package replay

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/store"
)

// ReviewOptions are what an approver adds to a review.
type ReviewOptions struct {
	Why string
	// AllowFreshKey is the approver's explicit consent to a request that
	// gives replayed jobs a new idempotency key.
	AllowFreshKey bool
	// CohortHash is the cohort hash (hex) the approver was shown; an
	// approval of a request whose hash differs is refused (rule
	// cohort-hash).
	CohortHash string
}

// Approve approves request id as the service's login, through the schema's
// replay_review function. The database refuses self-approval (by login,
// whatever the label), approvers outside the policy, expired or already
// reviewed requests, a cohort hash other than the one shown and cohorts
// that changed since they were frozen; the refusal comes back as a *Refusal
// naming the rule. An approval authorises one run.
func (s *Service) Approve(ctx context.Context, id int64, opts ReviewOptions) (Request, error) {
	return s.review(ctx, id, StatusApproved, opts)
}

// Reject rejects request id; its letters are free again. Why is required.
func (s *Service) Reject(ctx context.Context, id int64, opts ReviewOptions) (Request, error) {
	return s.review(ctx, id, StatusRejected, opts)
}

func (s *Service) review(ctx context.Context, id int64, to Status, opts ReviewOptions) (Request, error) {
	action, decision := "replay.approve", "approve"
	if to == StatusRejected {
		action, decision = "replay.reject", "reject"
	}
	var shown []byte
	if opts.CohortHash != "" {
		var err error
		if shown, err = hex.DecodeString(opts.CohortHash); err != nil {
			err = refuse("cohort-hash", "cohort hash %q is not hex: copy it from `expiryctl replay show %d`", opts.CohortHash, id)
			s.recordRefusal(ctx, action, requestTarget(id), err, map[string]any{"why": opts.Why})
			return Request{}, err
		}
	}
	var out Request
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT expiryctl.replay_review($1, $2, $3, $4, $5, $6)`,
			s.Actor, id, decision, opts.Why, opts.AllowFreshKey, shown); err != nil {
			return databaseError(err)
		}
		var err error
		out, err = Get(ctx, tx, id)
		return err
	})
	if err != nil {
		s.recordRefusal(ctx, action, requestTarget(id), err, map[string]any{"why": opts.Why})
		// A request refused for expiry is marked so, for everyone to see.
		if r, ok := err.(*Refusal); ok && r.Rule == "approval-ttl" {
			_ = expireStale(context.WithoutCancel(ctx), s.Pool, s.Actor)
		}
		return Request{}, err
	}
	return out, nil
}

// Cancel stops a pending, approved, running or halted request. A running
// runner notices at its next check and stops publishing. Letters not yet
// replayed are free again.
func (s *Service) Cancel(ctx context.Context, id int64, why string) (Request, error) {
	var out Request
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT expiryctl.replay_cancel($1, $2, $3)`, s.Actor, id, why); err != nil {
			return databaseError(err)
		}
		var err error
		out, err = Get(ctx, tx, id)
		return err
	})
	if err != nil {
		s.recordRefusal(ctx, "replay.cancel", requestTarget(id), err, map[string]any{"why": why})
	}
	return out, err
}

// Item is one frozen letter of a request and its run state.
type Item struct {
	DeadLetterID  int64               `json:"dead_letter_id"`
	Ordinal       int                 `json:"ordinal"`
	PayloadSHA256 string              `json:"payload_sha256"`
	State         string              `json:"state"`
	Attempts      int                 `json:"attempts"`
	LastError     string              `json:"last_error,omitempty"`
	Category      deadletter.Category `json:"reason_category"`
	ReservationID string              `json:"reservation_id"`
	ErrorClass    string              `json:"error_class"`
	// Target is where a replay would publish it.
	Target string `json:"target"`
}

// Detail is everything an approver approves.
type Detail struct {
	Request
	// Categories counts the cohort per reason category.
	Categories map[deadletter.Category]int `json:"categories"`
	// States counts the items per run state.
	States map[string]int `json:"states"`
	// Sample is the first items of the cohort, in run order.
	Sample []Item `json:"sample"`
	// Changes lists letters whose state no longer matches the frozen cohort;
	// approval is refused while there are any.
	Changes []CohortChange `json:"cohort_changes"`
	// Properties says where the replayed messages' properties will differ
	// from those the letters were received with.
	Properties PropertyNotes `json:"properties"`
}

// PropertyNotes counts the letters of a cohort whose properties a replay
// cannot send as they were received (see replayProperties).
type PropertyNotes struct {
	// NotRecorded counts letters captured before expiryctl recorded
	// properties: they are sent with content type and message id only.
	NotRecorded int `json:"not_recorded"`
	// MadePersistent counts letters that were not persistent (delivery mode
	// 1 or none); they are sent persistent.
	MadePersistent int `json:"made_persistent"`
	// UserIDs counts the letters per user_id. RabbitMQ accepts a user_id
	// only from a connection of that user, so each is kept when the run
	// publishes as that user and otherwise moves to the
	// x-original-user-id header.
	UserIDs map[string]int `json:"user_ids"`
}

// CohortChange is a letter that changed since its request was frozen.
type CohortChange struct {
	DeadLetterID int64  `json:"dead_letter_id"`
	Change       string `json:"change"`
}

// Show returns request id with its cohort, for the approver. sample bounds
// the items listed (0 lists all). Audited.
func (s *Service) Show(ctx context.Context, id int64, sample int) (Detail, error) {
	d, err := s.detail(ctx, id, sample)
	if err != nil {
		s.recordRefusal(ctx, "replay.show", requestTarget(id), err, map[string]any{})
		return Detail{}, err
	}
	return d, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "replay.show", Target: requestTarget(id),
		Details: map[string]any{"status": d.Status, "cohort_hash": d.CohortHash, "items": d.Items}})
}

func (s *Service) detail(ctx context.Context, id int64, sample int) (Detail, error) {
	req, err := Get(ctx, s.Pool, id)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Request: req, Categories: map[deadletter.Category]int{}, States: map[string]int{}, Sample: []Item{}, Changes: []CohortChange{}}
	rows, err := s.Pool.Query(ctx, `SELECT d.reason_category, i.state, count(*) FROM expiryctl.replay_items i
		JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id WHERE i.request_id = $1 GROUP BY 1, 2`, id)
	if err != nil {
		return Detail{}, err
	}
	for rows.Next() {
		var c deadletter.Category
		var state string
		var n int
		if err := rows.Scan(&c, &state, &n); err != nil {
			rows.Close()
			return Detail{}, err
		}
		d.Categories[c] += n
		d.States[state] += n
	}
	if err := rows.Err(); err != nil {
		return Detail{}, err
	}
	limit := any(nil)
	if sample > 0 {
		limit = sample
	}
	rows, err = s.Pool.Query(ctx, `SELECT i.dead_letter_id, i.ordinal, encode(i.payload_sha256, 'hex'), i.state, i.attempts,
		coalesce(i.last_error, ''), d.reason_category, coalesce(d.reservation_id, ''), coalesce(d.error_class, ''),
		CASE WHEN d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL
		       THEN 'exchange ' || coalesce(d.original_exchange, '""') || ' key ' || coalesce(d.original_routing_key, '""')
		     WHEN d.origin_queue IS NOT NULL THEN 'queue ' || d.origin_queue
		     ELSE 'exchange ' || coalesce($2, '""') || ' key ' || coalesce($3, '""') END
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		WHERE i.request_id = $1 ORDER BY i.ordinal LIMIT $4`, id, nullIfEmpty(req.ToExchange), nullIfEmpty(req.ToRoutingKey), limit)
	if err != nil {
		return Detail{}, err
	}
	d.Sample, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		err := row.Scan(&it.DeadLetterID, &it.Ordinal, &it.PayloadSHA256, &it.State, &it.Attempts, &it.LastError,
			&it.Category, &it.ReservationID, &it.ErrorClass, &it.Target)
		return it, err
	})
	if err != nil {
		return Detail{}, err
	}
	if d.Properties, err = propertyNotes(ctx, s.Pool, id); err != nil {
		return Detail{}, err
	}
	if req.Open() {
		rows, err = s.Pool.Query(ctx, `SELECT dead_letter_id, change FROM expiryctl.replay_cohort_changes($1) ORDER BY 1`, id)
		if err != nil {
			return Detail{}, err
		}
		d.Changes, err = pgx.CollectRows(rows, pgx.RowToStructByPos[CohortChange])
		if err != nil {
			return Detail{}, err
		}
	}
	return d, nil
}

func propertyNotes(ctx context.Context, q store.Querier, id int64) (PropertyNotes, error) {
	notes := PropertyNotes{UserIDs: map[string]int{}}
	// The user_id is read back through DecodeProperties, which undoes the
	// tag a user_id that is not plain UTF-8 is stored with.
	rows, err := q.Query(ctx, `SELECT d.properties IS NULL,
		       d.properties IS NOT NULL AND coalesce(d.properties->>'delivery_mode', '') <> '2',
		       CASE WHEN d.properties ? 'user_id' THEN jsonb_build_object('user_id', d.properties->'user_id')::text END,
		       count(*)
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		WHERE i.request_id = $1 GROUP BY 1, 2, 3`, id)
	if err != nil {
		return PropertyNotes{}, err
	}
	for rows.Next() {
		var missing, transient bool
		var user *string
		var n int
		if err := rows.Scan(&missing, &transient, &user, &n); err != nil {
			rows.Close()
			return PropertyNotes{}, err
		}
		if missing {
			notes.NotRecorded += n
		}
		if transient {
			notes.MadePersistent += n
		}
		if user != nil {
			p, err := deadletter.DecodeProperties([]byte(*user))
			if err != nil {
				rows.Close()
				return PropertyNotes{}, err
			}
			notes.UserIDs[p.UserID] += n
		}
	}
	return notes, rows.Err()
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// List returns requests newest first, optionally of one status. Audited.
func (s *Service) List(ctx context.Context, status Status, limit int) ([]Request, error) {
	if err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return expireStale(ctx, tx, s.Actor) }); err != nil {
		return nil, err
	}
	sql := "SELECT " + requestColumns + " FROM expiryctl.replay_requests"
	args := []any{}
	if status != "" {
		args = append(args, string(status))
		sql += " WHERE status = $1"
	}
	args = append(args, limit)
	sql += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Request, error) { return scanRequest(row) })
	if err != nil {
		return nil, err
	}
	return out, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "replay.list",
		Details: map[string]any{"status": status, "returned": len(out)}})
}

// CountOpen counts open requests by status. It neither writes nor audits:
// it serves views that refresh on a timer, such as the terminal UI's summary.
func (s *Service) CountOpen(ctx context.Context) (map[Status]int, error) {
	rows, err := s.Pool.Query(ctx, `SELECT status, count(*) FROM expiryctl.replay_requests
		WHERE status IN ('pending', 'approved', 'running', 'halted') GROUP BY status`)
	if err != nil {
		return nil, err
	}
	counts := map[Status]int{}
	for rows.Next() {
		var st Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		counts[st] = n
	}
	return counts, rows.Err()
}
