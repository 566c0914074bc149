package replay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// outcomeTimeout bounds each statement of an outcome poll, so that a slow
// reservation database shows as an error rather than a watcher stuck.
const outcomeTimeout = "5s"

// outcomeSQL wraps the policy's outcome query as eligibilitySQL wraps the
// eligibility query: exactly four parameters of known types, so that a
// query that uses only $1 works, and any SELECT as a lateral subquery.
func outcomeSQL(query string) string {
	return `SELECT q.* FROM (SELECT $1::text, $2::text, $3::bigint, $4::timestamptz)
		AS expiryctl_args (reservation_id, idempotency_key, expected_version, published_at),
		LATERAL (` + query + `) AS q LIMIT 1`
}

// outcomeDatabase is the reservation database the outcome query runs
// against: not expiryctl's schema, so none of this package's tables.
type outcomeDatabase struct {
	pool *pgxpool.Pool
}

// ask runs the outcome query for items in one READ ONLY transaction, all
// of them queued in one batch: one round trip for the lot, each item by
// its own statement.
func (o outcomeDatabase) ask(ctx context.Context, q outcomeQuery, items []*watchedItem) ([]outcomeAnswer, error) {
	tx, err := o.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	b := &pgx.Batch{}
	b.Queue("SET LOCAL statement_timeout = '" + outcomeTimeout + "'")
	for _, it := range items {
		b.Queue(q.sql, nullIfEmpty(it.job.reservationID), nullIfEmpty(it.job.idempotencyKey), it.job.expectedVersion, it.published)
	}
	br := tx.SendBatch(ctx, b)
	answers, err := readOutcomes(br, items)
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = closeErr
	}
	if err != nil {
		return nil, err
	}
	return answers, tx.Commit(ctx)
}

func readOutcomes(br pgx.BatchResults, items []*watchedItem) ([]outcomeAnswer, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	answers := make([]outcomeAnswer, len(items))
	for i, it := range items {
		values, found, err := firstRow(br)
		if isStatementError(err) {
			return nil, &OutcomeQueryError{DeadLetterID: it.id, Err: err}
		} else if err != nil {
			return nil, err
		}
		if answers[i], err = outcomeAnswerOf(it.id, values, found); err != nil {
			return nil, err
		}
	}
	return answers, nil
}

// firstRow reads the values of the next batch result's first row.
func firstRow(br pgx.BatchResults) ([]any, bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	return firstValues(rows)
}

// firstValues reads the first row's values whatever their types turned out
// to be, and closes rows: the policy's queries answer with one row or none.
func firstValues(rows pgx.Rows) ([]any, bool, error) {
	defer rows.Close()
	if !rows.Next() {
		return nil, false, rows.Err()
	}
	values, err := rows.Values()
	if err != nil {
		return nil, false, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return values, true, nil
}

// OutcomesRecord: replay_outcomes_record refuses a caller that is not the
// running request's runner, and items the run did not confirm.
func (p postgresTables) OutcomesRecord(ctx context.Context, request int64, rows []outcomeRow) error {
	ids := make([]int64, len(rows))
	published, confirmed, windowEnds := make([]time.Time, len(rows)), make([]time.Time, len(rows)), make([]time.Time, len(rows))
	terminal := make([]*time.Time, len(rows))
	duplicates := make([]bool, len(rows))
	for i, r := range rows {
		ids[i], published[i], confirmed[i], windowEnds[i], terminal[i], duplicates[i] = r.item, r.published, r.confirmed, r.windowEnd, r.terminalAt, r.duplicate
	}
	_, err := p.q.Exec(ctx, `SELECT expiryctl.replay_outcomes_record($1, $2, $3, $4, $5, $6, $7)`,
		request, ids, published, confirmed, windowEnds, terminal, duplicates)
	return databaseError(err)
}

// OutcomesSummary counts a request's recorded outcomes; nil when it has
// none.
func (p postgresTables) OutcomesSummary(ctx context.Context, request int64) (*OutcomeStats, error) {
	var s OutcomeStats
	var rows int
	var p50, p99 time.Duration
	err := p.q.QueryRow(ctx, `SELECT count(*)::int,
			count(*) FILTER (WHERE terminal_at IS NOT NULL)::int,
			count(*) FILTER (WHERE terminal_at > window_ends_at)::int,
			count(*) FILTER (WHERE terminal_at IS NULL)::int,
			count(*) FILTER (WHERE terminal_at IS NOT NULL AND duplicate)::int,
			extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY latency) FILTER (WHERE terminal_at IS NOT NULL AND NOT duplicate))::float8,
			extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY latency) FILTER (WHERE terminal_at IS NOT NULL AND NOT duplicate))::float8,
			(SELECT count(*)::int FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed')
		FROM expiryctl.replay_outcomes WHERE request_id = $1`, request).Scan(&rows, &s.Terminal, &s.Late, &s.Unsettled, &s.Conflicts,
		durationScanner{&p50}, durationScanner{&p99}, &s.Watched)
	if err != nil || rows == 0 {
		return nil, err
	}
	s.LatencyP50, s.LatencyP99 = p50, p99
	s.Waiting = max(0, s.Watched-rows)
	return &s, nil
}
