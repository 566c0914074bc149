package replay

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
)

// Kind says what running a request does to its letters.
type Kind string

// The kinds of request.
const (
	KindReplay  Kind = "replay"
	KindDiscard Kind = "discard"
)

// Status is where a request stands.
type Status string

// The statuses of a request. Pending, approved, running and halted are open:
// their letters cannot join another request.
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusRejected  Status = "rejected"
	StatusExpired   Status = "expired"
	StatusRunning   Status = "running"
	StatusHalted    Status = "halted"
	StatusCompleted Status = "completed"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every request status.
func Statuses() []Status {
	return []Status{StatusPending, StatusApproved, StatusRejected, StatusExpired, StatusRunning, StatusHalted, StatusCompleted, StatusCancelled}
}

// ParseStatus returns the status named s or an error listing the valid ones.
func ParseStatus(s string) (Status, error) {
	names := []string{}
	for _, st := range Statuses() {
		if string(st) == s {
			return st, nil
		}
		names = append(names, string(st))
	}
	return "", fmt.Errorf("unknown request status %q: valid statuses are %s", s, strings.Join(names, ", "))
}

// StopConditions halt a run when the replay makes things worse.
type StopConditions struct {
	// FailureRatio: failed publishes over attempted publishes.
	FailureRatio float64 `json:"failure_ratio"`
	// QueueDepth: messages waiting in the target queue (the headroom).
	QueueDepth int `json:"queue_depth"`
	// RedeadRatio: replayed letters dead-lettered again over those published.
	RedeadRatio float64 `json:"redead_ratio"`
	// CanaryWindow: how long the canary's letters have to come back.
	CanaryWindow time.Duration `json:"canary_window"`
}

// Request is a replay or discard request.
type Request struct {
	ID                   int64           `json:"id"`
	Kind                 Kind            `json:"kind"`
	Status               Status          `json:"status"`
	Items                int             `json:"items"`
	Filter               json.RawMessage `json:"filter"`
	CohortHash           string          `json:"cohort_hash"`
	Rate                 float64         `json:"rate"`
	Canary               int             `json:"canary"`
	Stop                 StopConditions  `json:"stop_conditions"`
	FreshKey             bool            `json:"fresh_key"`
	EligibilityConfirmed bool            `json:"eligibility_confirmed"`
	ToExchange           string          `json:"to_exchange,omitempty"`
	ToRoutingKey         string          `json:"to_routing_key,omitempty"`
	Why                  string          `json:"why"`
	RequestedBy          string          `json:"requested_by"`
	RequestedDBRole      string          `json:"requested_db_role"`
	CreatedAt            time.Time       `json:"created_at"`
	ExpiresAt            time.Time       `json:"expires_at"`
	ReviewedBy           string          `json:"reviewed_by,omitempty"`
	ReviewedDBRole       string          `json:"reviewed_db_role,omitempty"`
	ReviewedAt           *time.Time      `json:"reviewed_at,omitempty"`
	ReviewWhy            string          `json:"review_why,omitempty"`
	ApprovalSpent        bool            `json:"approval_spent"`
	ApprovalExpiresAt    *time.Time      `json:"approval_expires_at,omitempty"`
	Approvals            int             `json:"approvals"`
	StartedAt            *time.Time      `json:"started_at,omitempty"`
	FinishedAt           *time.Time      `json:"finished_at,omitempty"`
	HaltReason           string          `json:"halt_reason,omitempty"`
}

// Open reports whether the request still holds its letters.
func (r Request) Open() bool {
	switch r.Status {
	case StatusPending, StatusApproved, StatusRunning, StatusHalted:
		return true
	}
	return false
}

// Service is the request side of replay: create, show, list, review, cancel.
// Every call is audited as Actor.
type Service struct {
	Pool  *pgxpool.Pool
	Actor string
	// Now is the clock (default time.Now); the database's own clock decides
	// expiry, this one only fills in defaults.
	Now func() time.Time
}

// Selection chooses the letters of a new request: explicit ids, or a filter
// bounded by Max (the oldest matching letters first).
type Selection struct {
	IDs    []int64           `json:"ids,omitempty"`
	Filter deadletter.Filter `json:"filter,omitzero"`
	Max    int               `json:"max,omitempty"`
}

// NewRequest is what a requester asks for.
type NewRequest struct {
	Kind      Kind
	Selection Selection
	// Rate is the replay ceiling per second; 0 means the policy maximum.
	Rate float64
	// Canary is how many letters go first; nil means 10% of the cohort, at
	// least 1 (0 for a discard).
	Canary *int
	// ToExchange and ToRoutingKey are the target for letters that name no
	// origin of their own.
	ToExchange, ToRoutingKey string
	// Why is the incident or ticket; required.
	Why string
	// FreshKey gives each replayed job a new idempotency key; it requires
	// ConfirmEligible, the requester's word that the reservations are still
	// eligible, and the approver's explicit consent.
	FreshKey        bool
	ConfirmEligible bool
}

// Created is the result of Create.
type Created struct {
	Request Request `json:"request"`
	// Matched counts the letters the filter matched before --max bounded it.
	Matched int `json:"matched"`
}

const requestColumns = `id, kind, status, item_count, filter, cohort_hash, rate::float8, canary,
	stop_failure_ratio::float8, stop_queue_depth, stop_redead_ratio::float8, extract(epoch FROM canary_window)::float8,
	fresh_key, eligibility_confirmed, coalesce(to_exchange, ''), coalesce(to_routing_key, ''), why,
	requested_by, requested_db_role, created_at, expires_at, coalesce(reviewed_by, ''), coalesce(reviewed_db_role, ''),
	reviewed_at, coalesce(review_why, ''), approval_spent, approval_expires_at, approvals, started_at, finished_at,
	coalesce(halt_reason, '')`

func scanRequest(row pgx.Row) (Request, error) {
	var r Request
	var hash []byte
	var window time.Duration
	err := row.Scan(&r.ID, &r.Kind, &r.Status, &r.Items, &r.Filter, &hash, &r.Rate, &r.Canary,
		&r.Stop.FailureRatio, &r.Stop.QueueDepth, &r.Stop.RedeadRatio, durationScanner{&window},
		&r.FreshKey, &r.EligibilityConfirmed, &r.ToExchange, &r.ToRoutingKey, &r.Why,
		&r.RequestedBy, &r.RequestedDBRole, &r.CreatedAt, &r.ExpiresAt, &r.ReviewedBy, &r.ReviewedDBRole,
		&r.ReviewedAt, &r.ReviewWhy, &r.ApprovalSpent, &r.ApprovalExpiresAt, &r.Approvals, &r.StartedAt, &r.FinishedAt,
		&r.HaltReason)
	r.CohortHash = hex.EncodeToString(hash)
	r.Stop.CanaryWindow = window
	return r, err
}

// NotFoundError names a request that does not exist.
type NotFoundError struct{ ID int64 }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("replay request %d not found: `expiryctl replay list` shows the requests there are", e.ID)
}

// Is makes errors.Is(err, deadletter.ErrNotFound) true, so that both map to
// the same exit code.
func (e *NotFoundError) Is(target error) bool { return target == deadletter.ErrNotFound }

// Get reads one request without auditing it; callers audit what they do.
func Get(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id int64) (Request, error) {
	r, err := scanRequest(q.QueryRow(ctx, "SELECT "+requestColumns+" FROM expiryctl.replay_requests WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Request{}, &NotFoundError{ID: id}
	}
	return r, err
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// identity checks the actor against the policy's identity mode.
func (s *Service) identity(ctx context.Context, q pgx.Tx, pol Policy) error {
	if pol.IdentityMode != IdentityDBRole {
		return nil
	}
	var role string
	if err := q.QueryRow(ctx, "SELECT session_user").Scan(&role); err != nil {
		return err
	}
	if s.Actor != role {
		return refuse("identity-db-role", "policy identity_mode is db-role: you act as the database role %s; drop --actor/EXPIRYCTL_ACTOR (or set it to %s)", role, role)
	}
	return nil
}

// expireStale marks requests whose review or approval window has passed, so
// their letters are free again. The database decides what is stale.
func expireStale(ctx context.Context, tx pgx.Tx, actor string) error {
	rows, err := tx.Query(ctx, `UPDATE expiryctl.replay_requests SET status = 'expired'
		WHERE (status = 'pending' AND expires_at <= now()) OR (status = 'approved' AND approval_expires_at <= now())
		RETURNING id`)
	if err != nil {
		return asRefusal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return asRefusal(err)
	}
	for _, id := range ids {
		if err := audit.Record(ctx, tx, audit.Entry{Actor: actor, Action: "replay.expire", Target: requestTarget(id),
			Details: map[string]any{"reason": "review or approval window passed"}}); err != nil {
			return err
		}
	}
	return nil
}

func requestTarget(id int64) string { return "replay_request:" + strconv.FormatInt(id, 10) }

// candidate is a letter considered for a new request.
type candidate struct {
	id                                int64
	status                            string
	payloadHash                       []byte
	exchange, routingKey, originQueue string
	redacted                          bool
}

// Create freezes a new request: the exact letters, a hash of each payload and
// the selection as written. Letters already in another open request are
// refused when named by id, and not matched by a filter (which selects only
// letters waiting for a decision). The request and its audit row commit
// together.
func (s *Service) Create(ctx context.Context, nr NewRequest) (Created, error) {
	if strings.TrimSpace(nr.Why) == "" {
		return Created{}, refuse("why", "say why: --why names the incident or ticket")
	}
	if nr.FreshKey && !nr.ConfirmEligible {
		return Created{}, refuse("fresh-key", "a fresh idempotency key needs --confirm-eligible: confirm the reservations are still eligible to expire")
	}
	if nr.FreshKey && nr.Kind == KindDiscard {
		return Created{}, refuse("fresh-key", "a discard does not publish, so --fresh-key does not apply")
	}
	if len(nr.Selection.IDs) == 0 && nr.Selection.Max <= 0 {
		return Created{}, refuse("bounded-cohort", "a filter needs --max N: a request is bounded")
	}
	var created Created
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := expireStale(ctx, tx, s.Actor); err != nil {
			return err
		}
		pol, err := LoadPolicy(ctx, tx)
		if err != nil {
			return err
		}
		if err := s.identity(ctx, tx, pol); err != nil {
			return err
		}
		rate := nr.Rate
		if rate == 0 {
			rate = pol.MaxRate
		}
		if rate > pol.MaxRate {
			return refuse("max-rate", "rate %g/s is above the policy maximum of %g/s: lower --rate", rate, pol.MaxRate)
		}
		if nr.Selection.Max > pol.MaxCohort {
			return refuse("max-cohort", "--max %d is above the policy maximum of %d letters per request", nr.Selection.Max, pol.MaxCohort)
		}
		if len(nr.Selection.IDs) > pol.MaxCohort {
			return refuse("max-cohort", "%d ids is above the policy maximum of %d letters per request", len(nr.Selection.IDs), pol.MaxCohort)
		}
		cands, matched, err := selectCandidates(ctx, tx, nr.Selection)
		if err != nil {
			return err
		}
		if len(cands) == 0 {
			return refuse("empty-cohort", "no dead letter waiting for a decision matches: check the filter with `expiryctl dlq list` (letters already replayed, discarded or in an open request are not eligible)")
		}
		if err := checkCandidates(cands, nr); err != nil {
			return err
		}

		canary := 0
		if nr.Kind == KindReplay {
			canary = max(1, len(cands)/10)
		}
		if nr.Canary != nil {
			canary = min(*nr.Canary, len(cands))
		}
		selection, err := json.Marshal(nr.Selection)
		if err != nil {
			return err
		}
		ids := make([]int64, len(cands))
		hashes := make([][]byte, len(cands))
		ordinals := make([]int32, len(cands))
		h := sha256.New()
		for i, c := range cands {
			ids[i], hashes[i], ordinals[i] = c.id, c.payloadHash, int32(i)
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(c.id)))
			h.Write(c.payloadHash)
		}
		req, err := scanRequest(tx.QueryRow(ctx, `INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash,
			rate, canary, stop_failure_ratio, stop_queue_depth, stop_redead_ratio, canary_window, fresh_key,
			eligibility_confirmed, to_exchange, to_routing_key, why, requested_by, expires_at)
			SELECT $1, $2, $3, $4, $5, $6, p.stop_failure_ratio, p.stop_queue_depth, p.stop_redead_ratio, p.canary_window,
			       $7, $8, nullif($9, ''), nullif($10, ''), $11, $12, now() + p.approval_ttl
			FROM expiryctl.policy p WHERE p.singleton
			RETURNING `+requestColumns,
			string(nr.Kind), selection, len(cands), h.Sum(nil), rate, canary, nr.FreshKey, nr.ConfirmEligible,
			nr.ToExchange, nr.ToRoutingKey, nr.Why, s.Actor))
		if err != nil {
			return asRefusal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal)
			SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::int[])`, req.ID, ids, hashes, ordinals); err != nil {
			return asRefusal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE expiryctl.dead_letters SET status = 'in_request' WHERE id = ANY($1)`, ids); err != nil {
			return err
		}
		created = Created{Request: req, Matched: matched}
		return audit.Record(ctx, tx, audit.Entry{Actor: s.Actor, Action: "replay.request", Target: requestTarget(req.ID),
			Details: map[string]any{"kind": nr.Kind, "selection": nr.Selection, "matched": matched, "items": ids,
				"cohort_hash": req.CohortHash, "rate": rate, "canary": canary, "fresh_key": nr.FreshKey,
				"to_exchange": nr.ToExchange, "to_routing_key": nr.ToRoutingKey, "why": nr.Why}})
	})
	if err != nil {
		s.recordRefusal(ctx, "replay.request", "", err, map[string]any{"kind": nr.Kind, "selection": nr.Selection, "why": nr.Why})
		return Created{}, err
	}
	return created, nil
}

// selectCandidates locks the letters of the selection, oldest first.
func selectCandidates(ctx context.Context, tx pgx.Tx, sel Selection) ([]candidate, int, error) {
	const cols = `id, status, payload_sha256, coalesce(original_exchange, ''), coalesce(original_routing_key, ''),
		coalesce(origin_queue, ''), redacted_at IS NOT NULL`
	scan := func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		err := row.Scan(&c.id, &c.status, &c.payloadHash, &c.exchange, &c.routingKey, &c.originQueue, &c.redacted)
		return c, err
	}
	if len(sel.IDs) > 0 {
		rows, err := tx.Query(ctx, `SELECT `+cols+` FROM expiryctl.dead_letters WHERE id = ANY($1) ORDER BY id FOR UPDATE`, sel.IDs)
		if err != nil {
			return nil, 0, err
		}
		cands, err := pgx.CollectRows(rows, scan)
		if err != nil {
			return nil, 0, err
		}
		found := map[int64]bool{}
		for _, c := range cands {
			found[c.id] = true
		}
		var missing []string
		for _, id := range sel.IDs {
			if !found[id] {
				missing = append(missing, strconv.FormatInt(id, 10))
			}
		}
		if len(missing) > 0 {
			return nil, 0, &deadletter.NotFoundError{ID: mustParse(missing[0])}
		}
		return cands, len(cands), nil
	}
	where, args := deadletter.FilterSQL(sel.Filter)
	where = append(where, "status = 'dead'", "redacted_at IS NULL")
	var matched int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM expiryctl.dead_letters WHERE "+strings.Join(where, " AND "), args...).Scan(&matched); err != nil {
		return nil, 0, err
	}
	args = append(args, sel.Max)
	rows, err := tx.Query(ctx, "SELECT "+cols+" FROM expiryctl.dead_letters WHERE "+strings.Join(where, " AND ")+
		fmt.Sprintf(" ORDER BY dead_lettered_at, id LIMIT $%d FOR UPDATE", len(args)), args...)
	if err != nil {
		return nil, 0, err
	}
	cands, err := pgx.CollectRows(rows, scan)
	return cands, matched, err
}

func mustParse(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// checkCandidates refuses letters that cannot join a request, naming them.
func checkCandidates(cands []candidate, nr NewRequest) error {
	var taken, done, redacted, noTarget []string
	for _, c := range cands {
		id := strconv.FormatInt(c.id, 10)
		switch {
		case c.redacted:
			redacted = append(redacted, id)
		case c.status == string(deadletter.StatusInRequest):
			taken = append(taken, id)
		case c.status != string(deadletter.StatusDead):
			done = append(done, id+" ("+c.status+")")
		case nr.Kind == KindReplay && c.exchange == "" && c.routingKey == "" && c.originQueue == "" && nr.ToExchange == "" && nr.ToRoutingKey == "":
			noTarget = append(noTarget, id)
		}
	}
	switch {
	case len(taken) > 0:
		return refuse("one-open-request", "dead letters %s are already in another open request: leave them out, or cancel that request first (`expiryctl replay list --status pending`)", strings.Join(taken, ", "))
	case len(done) > 0:
		return refuse("decided", "dead letters %s were already decided and cannot join a request", strings.Join(done, ", "))
	case len(redacted) > 0:
		return refuse("redacted", "dead letters %s were redacted by retention: there is no payload left to replay", strings.Join(redacted, ", "))
	case len(noTarget) > 0:
		return refuse("target", "dead letters %s name no origin (no x-original-exchange, no x-death queue): add --to-exchange and --routing-key", strings.Join(noTarget, ", "))
	}
	return nil
}

// recordRefusal audits a request that was refused or failed; the state
// change rolled back, so the row goes in on its own.
func (s *Service) recordRefusal(ctx context.Context, action, target string, err error, details map[string]any) {
	outcome := audit.Failed
	var refusal *Refusal
	if errors.As(err, &refusal) {
		outcome = audit.Refused
		details["rule"] = refusal.Rule
	}
	details["error"] = err.Error()
	_ = audit.Record(context.WithoutCancel(ctx), s.Pool, audit.Entry{Actor: s.Actor, Action: action, Target: target,
		Details: details, Outcome: outcome})
}
