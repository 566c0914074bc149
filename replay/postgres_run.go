package replay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
)

func (p postgresTables) RunLockTry(ctx context.Context, request int64, application string) (bool, error) {
	var ok bool
	err := p.q.QueryRow(ctx, "SELECT expiryctl.replay_run_acquire($1, $2)", request, application).Scan(&ok)
	return ok, databaseError(err)
}

func (p postgresTables) RunLockRelease(ctx context.Context, request int64) error {
	_, err := p.q.Exec(ctx, "SELECT expiryctl.replay_run_release($1)", request)
	return err
}

// RunStart: replay_run_start spends the approval (or takes over a running
// request whose runner is gone) and writes the start's audit row; it
// refuses anything else, and a caller whose login does not hold the runner
// lock.
func (p postgresTables) RunStart(ctx context.Context, actor string, request int64, seen *Observation, watched []byte) (bool, string, error) {
	var resumed bool
	var label string
	var consumers *string // NULL: nothing seen
	if seen != nil {
		b, err := json.Marshal(seen)
		if err != nil {
			return false, "", err
		}
		consumers = new(string(b))
	}
	var dlqWatch *string // NULL: a discard, which watches nothing
	if watched != nil {
		dlqWatch = new(string(watched))
	}
	if err := p.q.QueryRow(ctx, `SELECT resumed, label FROM expiryctl.replay_run_start($1, $2, $3::jsonb, $4::jsonb)`,
		actor, request, consumers, dlqWatch).Scan(&resumed, &label); err != nil {
		return false, "", databaseError(err)
	}
	return resumed, label, nil
}

func (p postgresTables) RunDiscardWindow(ctx context.Context, request int64, lo, hi int) (int, Status, error) {
	var status Status
	var decided int
	err := p.q.QueryRow(ctx, `SELECT status, decided FROM expiryctl.replay_discard_window($1, $2, $3)`, request, lo, hi).Scan(&status, &decided)
	if err != nil {
		return 0, "", databaseError(err)
	}
	return decided, stoppedUnless(status, StatusRunning), nil
}

func (p postgresTables) RunInterrupted(ctx context.Context, actor string, request int64, unsent []int64, details map[string]any) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_run_interrupted($1, $2, $3, $4)`, actor, request, nonNil(unsent), details)
	return err
}

func (p postgresTables) RunHalt(ctx context.Context, actor string, request int64, reason string, unsent []int64, details map[string]any) (Status, error) {
	var status Status
	err := p.q.QueryRow(ctx, `SELECT expiryctl.replay_run_halt($1, $2, $3, $4, $5)`, actor, request, reason, nonNil(unsent), details).Scan(&status)
	if err != nil {
		return "", databaseError(err)
	}
	return stoppedUnless(status, StatusHalted), nil
}

// RunComplete: replay_run_complete refuses while items are left to publish
// and records every item's outcome in the audit row it writes.
func (p postgresTables) RunComplete(ctx context.Context, actor string, request int64, details map[string]any) (Status, error) {
	var status Status
	if err := p.q.QueryRow(ctx, `SELECT expiryctl.replay_run_complete($1, $2, $3)`, actor, request, details).Scan(&status); err != nil {
		return "", databaseError(err)
	}
	return stoppedUnless(status, StatusCompleted), nil
}

func (p postgresTables) RunAckedAfterCancel(ctx context.Context, actor string, request int64, acked []int64) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_run_acked_after_cancel($1, $2, $3)`, actor, request, acked)
	return err
}

// RunRedeadLettered asks deadletter, whose table dead_letters is.
func (p postgresTables) RunRedeadLettered(ctx context.Context, request int64) (int, error) {
	return deadletter.CountRedeadLettered(ctx, p.q, request)
}

func (p postgresTables) RunWatchOwed(ctx context.Context, request int64) (WatchOwed, error) {
	var w WatchOwed
	err := p.q.QueryRow(ctx, `SELECT confirmed, came_back, window_left FROM expiryctl.replay_run_watch_owed($1)`, request).
		Scan(&w.Confirmed, &w.CameBack, &w.WindowLeft)
	return w, err
}

// RequestFates reads the confirmed items and their recorded terminal
// outcomes from replay's tables, and asks deadletter, whose table
// dead_letters is, how many came back.
func (p postgresTables) RequestFates(ctx context.Context, requests []int64) (map[int64]Fates, error) {
	rows, err := p.q.Query(ctx, `SELECT i.request_id, count(*)::int,
			(SELECT count(*)::int FROM expiryctl.replay_outcomes o WHERE o.request_id = i.request_id AND o.terminal_at IS NOT NULL)
		FROM expiryctl.replay_items i WHERE i.request_id = ANY($1) AND i.state = 'confirmed' GROUP BY i.request_id`, requests)
	if err != nil {
		return nil, err
	}
	type counts struct {
		request            int64
		confirmed, settled int
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (counts, error) {
		var c counts
		return c, row.Scan(&c.request, &c.confirmed, &c.settled)
	})
	if err != nil || len(found) == 0 {
		return map[int64]Fates{}, err
	}
	ids := make([]int64, len(found))
	for i, c := range found {
		ids[i] = c.request
	}
	back, err := deadletter.CountRedeadLetteredOf(ctx, p.q, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Fates, len(found))
	for _, c := range found {
		out[c.request] = fatesOf(c.confirmed, back[c.request], c.settled)
	}
	return out, nil
}

// CanaryRecord: a resumed run trusts these rows (a pass skips the canary),
// so only the request's runner may write them, through
// replay_canary_record.
func (p postgresTables) CanaryRecord(ctx context.Context, actor string, request int64, passed bool, details map[string]any) error {
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_canary_record($1, $2, $3, $4)`, actor, request, passed, details)
	return asRefusal(err)
}

// CanaryPassed and CanaryStarted read the rows replay_canary_record wrote
// in the audit trail, through audit: audit_log is its table.
func (p postgresTables) CanaryPassed(ctx context.Context, request int64, approval int) (bool, error) {
	return audit.CanaryPassed(ctx, p.q, requestTarget(request), approval)
}

func (p postgresTables) CanaryStarted(ctx context.Context, request int64, approval int) (*time.Duration, error) {
	return audit.CanaryStarted(ctx, p.q, requestTarget(request), approval)
}

// eligibilitySQL wraps the policy's query so that it always takes exactly
// three parameters of known types: a query that uses only $1, or compares
// $3 with an integer column, then works as its author meant. The query is
// a lateral subquery, so it may be any SELECT (with CTEs, ORDER BY, LIMIT).
func eligibilitySQL(query string) string {
	return `SELECT q.* FROM (SELECT $1::text, $2::text, $3::bigint) AS expiryctl_args (reservation_id, idempotency_key, expected_version),
		LATERAL (` + query + `) AS q LIMIT 1`
}

func (p postgresTables) EligibilityLimit(ctx context.Context) error {
	_, err := p.q.Exec(ctx, "SET LOCAL statement_timeout = '"+eligibilityTimeout+"'")
	return err
}

// EligibilityRow reads the first row's values whatever their types turned
// out to be.
func (p postgresTables) EligibilityRow(ctx context.Context, sql string, it *runItem) ([]any, bool, error) {
	rows, err := p.q.Query(ctx, sql, nullIfEmpty(it.reservationID), nullIfEmpty(it.idempotencyKey), it.expectedVersion)
	if err != nil {
		return nil, false, err
	}
	return firstValues(rows)
}
