package replay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const requestColumns = `id, kind, status, item_count, filter, cohort_hash, rate::float8, canary,
	stop_failure_ratio::float8, stop_queue_depth, stop_redead_ratio::float8, extract(epoch FROM canary_window)::float8,
	fresh_key, eligibility_confirmed, coalesce(to_exchange, ''), coalesce(to_routing_key, ''), why,
	requested_by, requested_db_role, created_at, expires_at, coalesce(reviewed_by, ''), coalesce(reviewed_db_role, ''),
	reviewed_at, coalesce(review_why, ''), approval_spent, approval_expires_at, approvals, started_at, finished_at,
	coalesce(halt_reason, ''), same_handler_ok, coalesce(same_handler_why, ''), include_permanent, failed_under, targets,
	coalesce(approval_note, ''), via_exchange, not_before, include_not_due, coalesce(unwatched_why, '')`

func scanRequest(row pgx.Row) (Request, error) {
	var r Request
	var hash []byte
	var window time.Duration
	var failedUnder map[string]int
	err := row.Scan(&r.ID, &r.Kind, &r.Status, &r.Items, &r.Filter, &hash, &r.Rate, &r.Canary,
		&r.Stop.FailureRatio, &r.Stop.QueueDepth, &r.Stop.RedeadRatio, durationScanner{&window},
		&r.FreshKey, &r.EligibilityConfirmed, &r.ToExchange, &r.ToRoutingKey, &r.Why,
		&r.RequestedBy, &r.RequestedDBRole, &r.CreatedAt, &r.ExpiresAt, &r.ReviewedBy, &r.ReviewedDBRole,
		&r.ReviewedAt, &r.ReviewWhy, &r.ApprovalSpent, &r.ApprovalExpiresAt, &r.Approvals, &r.StartedAt, &r.FinishedAt,
		&r.HaltReason, &r.SameHandlerOK, &r.SameHandlerWhy, &r.IncludePermanent, &failedUnder, &r.Targets,
		&r.ApprovalNote, &r.ViaExchange, &r.NotBefore, &r.IncludeNotDue, &r.UnwatchedWhy)
	r.FailedUnder = failedUnderFrom(failedUnder)
	if r.Targets == nil {
		r.Targets = []Target{}
	}
	r.CohortHash = hex.EncodeToString(hash)
	r.Stop.CanaryWindow = window
	return r, err
}

func (p postgresTables) RequestGet(ctx context.Context, id int64) (Request, error) {
	r, err := scanRequest(p.q.QueryRow(ctx, "SELECT "+requestColumns+" FROM expiryctl.replay_requests WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Request{}, &NotFoundError{ID: id}
	}
	return r, err
}

func (p postgresTables) RequestList(ctx context.Context, status Status, limit int) ([]Request, error) {
	sql := "SELECT " + requestColumns + " FROM expiryctl.replay_requests"
	args := []any{}
	if status != "" {
		args = append(args, string(status))
		sql += " WHERE status = $1"
	}
	args = append(args, limit)
	sql += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	rows, err := p.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Request, error) { return scanRequest(row) })
}

func (p postgresTables) RequestCountOpen(ctx context.Context) (map[Status]int, error) {
	rows, err := p.q.Query(ctx, `SELECT status, count(*) FROM expiryctl.replay_requests
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

// RequestCountRunnersGone reads the status and the lease in one statement:
// a runner commits its request's end before it lets its lease go, so a
// run that just ended is not counted as one whose runner is gone.
func (p postgresTables) RequestCountRunnersGone(ctx context.Context) (int, error) {
	var n int
	err := p.q.QueryRow(ctx, `SELECT count(*)::int FROM expiryctl.replay_requests r
		WHERE r.status = 'running' AND NOT EXISTS (
			SELECT 1 FROM expiryctl.replay_runner_leases l JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
			 WHERE l.request_id = r.id)`).Scan(&n)
	return n, err
}

func (p postgresTables) RequestStatus(ctx context.Context, id int64) (Status, string, error) {
	var status Status
	var reason string
	err := p.q.QueryRow(ctx, `SELECT status, coalesce(halt_reason, '') FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&status, &reason)
	return status, reason, err
}

func (p postgresTables) RequestCreate(ctx context.Context, actor string, nr NewRequest, selection []byte) (int64, int, error) {
	var canary *int32
	if nr.Canary != nil {
		c := int32(min(max(*nr.Canary, 0), 1<<31-1))
		canary = &c
	}
	// A rate of 0 is the Go API's "not given"; the database reads NULL as
	// the policy's maximum and refuses 0 from anyone who sends it.
	var rate *float64
	if nr.Rate != 0 {
		rate = &nr.Rate
	}
	var id int64
	var matched int
	err := p.q.QueryRow(ctx, `SELECT request_id, matched FROM expiryctl.replay_request_create($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		actor, string(nr.Kind), string(selection), rate, canary, nr.ToExchange, nr.ToRoutingKey, nr.Why,
		nr.FreshKey, nr.ConfirmEligible, nr.SameHandlerWhy != "", nr.SameHandlerWhy, nr.IncludePermanent, nr.ViaExchange, nr.NotBefore, nr.IncludeNotDue,
		nullIfEmpty(nr.UnwatchedWhy)).Scan(&id, &matched)
	return id, matched, databaseError(err)
}

func (p postgresTables) SessionIdentity(ctx context.Context) (login, database string, err error) {
	err = p.q.QueryRow(ctx, `SELECT session_user::text, current_database()::text`).Scan(&login, &database)
	return login, database, err
}

func (p postgresTables) RequestReview(ctx context.Context, actor string, id int64, decision, why string, allowFreshKey bool, shown []byte, signed []byte) error {
	var note *string
	if signed != nil {
		s := string(signed)
		note = &s
	}
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_review($1, $2, $3, $4, $5, $6, $7)`, actor, id, decision, why, allowFreshKey, shown, note)
	return databaseError(err)
}

func (p postgresTables) RequestCancel(ctx context.Context, actor string, id int64, why string) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_cancel($1, $2, $3)`, actor, id, why)
	return databaseError(err)
}

func (p postgresTables) RequestExpireStale(ctx context.Context, actor string) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_expire_stale($1)`, actor)
	return asRefusal(err)
}

func (p postgresTables) RequestLedger(ctx context.Context) ([]LedgerEntry, error) {
	rows, err := p.q.Query(ctx, `SELECT r.id, r.kind, r.status, coalesce(r.reviewed_db_role, ''),
		       coalesce((SELECT jsonb_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items
		                 WHERE request_id = r.id GROUP BY state) s), '{}')
		FROM expiryctl.replay_requests r ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("read the replay requests: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LedgerEntry, error) {
		e := LedgerEntry{Outcomes: map[int64]string{}}
		err := row.Scan(&e.ID, &e.Kind, &e.Status, &e.ReviewedDBRole, &e.States)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the replay requests: %w", err)
	}
	return entries, nil
}
