package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

func (p postgresTables) PolicyGet(ctx context.Context) (Policy, error) {
	var pol Policy
	var ttl, window, retention, outcomeWindow time.Duration
	err := p.q.QueryRow(ctx, `SELECT approvers, max_cohort, max_rate::float8,
		extract(epoch FROM approval_ttl)::float8, stop_failure_ratio::float8, stop_queue_depth,
		stop_redead_ratio::float8, extract(epoch FROM canary_window)::float8, identity_mode,
		eligibility_query, extract(epoch FROM retention)::float8, updated_at, updated_by,
		outcome_query, extract(epoch FROM outcome_window)::float8, stop_unsettled_ratio::float8, stop_conflict_ratio::float8,
		signed_approvals, gap_query, job_tables
		FROM expiryctl.policy WHERE singleton`).Scan(&pol.Approvers, &pol.MaxCohort, &pol.MaxRate,
		durationScanner{&ttl}, &pol.StopFailureRatio, &pol.StopQueueDepth, &pol.StopRedeadRatio,
		durationScanner{&window}, &pol.IdentityMode, &pol.EligibilityQuery, durationScanner{&retention}, &pol.UpdatedAt, &pol.UpdatedBy,
		&pol.OutcomeQuery, durationScanner{&outcomeWindow}, &pol.StopUnsettledRatio, &pol.StopConflictRatio,
		&pol.SignedApprovals, &pol.GapQuery, &pol.JobTables)
	if err != nil {
		return Policy{}, fmt.Errorf("read policy: %w", err)
	}
	pol.ApprovalTTL, pol.CanaryWindow, pol.Retention, pol.OutcomeWindow = ttl, window, retention, outcomeWindow
	if pol.Approvers == nil {
		pol.Approvers = []string{}
	}
	return pol, nil
}

func (p postgresTables) PolicyDocument(ctx context.Context) (map[string]any, error) {
	var doc map[string]any
	err := p.q.QueryRow(ctx, `SELECT to_jsonb(p) - 'singleton' FROM expiryctl.policy p WHERE singleton`).Scan(&doc)
	return doc, err
}

func (p postgresTables) PolicyDefaults(ctx context.Context) (map[string]any, error) {
	for _, sql := range []string{
		`CREATE TEMP TABLE policy_defaults (LIKE expiryctl.policy INCLUDING DEFAULTS) ON COMMIT DROP`,
		`INSERT INTO policy_defaults DEFAULT VALUES`,
	} {
		if _, err := p.q.Exec(ctx, sql); err != nil {
			return nil, err
		}
	}
	var doc map[string]any
	err := p.q.QueryRow(ctx, `SELECT to_jsonb(p) - 'singleton' FROM policy_defaults p`).Scan(&doc)
	return doc, err
}

func (p postgresTables) PolicySet(ctx context.Context, actor string, changes map[string]any, why string) (*int64, bool, error) {
	var id *int64
	var applied bool
	if err := p.q.QueryRow(ctx, `SELECT change_id, applied FROM expiryctl.policy_set($1, $2, $3)`, actor, changes, why).Scan(&id, &applied); err != nil {
		return nil, false, policyError(err)
	}
	return id, applied, nil
}

func (p postgresTables) PolicyReview(ctx context.Context, actor string, id int64, decision, why string) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.policy_review($1, $2, $3, $4)`, actor, id, decision, why)
	return policyError(err)
}

func (p postgresTables) PolicyChangesPending(ctx context.Context) ([]PolicyChange, error) {
	rows, err := p.q.Query(ctx, `SELECT id, changes, why, proposed_by, proposed_db_role, proposed_at, status,
		coalesce(reviewed_by, ''), coalesce(reviewed_db_role, ''), reviewed_at
		FROM expiryctl.policy_changes WHERE status = 'pending' ORDER BY id`)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PolicyChange])
	if out == nil {
		out = []PolicyChange{}
	}
	return out, err
}
