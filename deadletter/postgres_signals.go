package deadletter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The queries behind Archive.Signals. Unbounded, each reads tallies that
// the statement triggers of migration 00012 keep (dead_letter_class_tallies,
// dead_letter_due_tallies, dead_letter_arrival_tallies) and at most an hour
// or two of an index, never the whole archive: see that migration for how
// lateness percentiles are found from hourly sums. Bounded by --since or --until, they read the
// letters of the window through dead_letters_newest.

// LetterSnapshot implements letterStore. It needs a pool or a connection:
// a transaction already has its own isolation level.
func (s postgresLetters) LetterSnapshot(ctx context.Context, fn func(letterStore) error) error {
	db, ok := s.q.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	})
	if !ok {
		return fmt.Errorf("deadletter: cannot begin a read-only snapshot on a %T", s.q)
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep or lose
	return fn(postgresLetters{q: tx})
}

// LetterClock implements letterStore.
func (s postgresLetters) LetterClock(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := s.q.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now.UTC(), err
}

// windowSQL returns the WHERE conditions and arguments that keep the
// letters dead-lettered within w's bounds.
func windowSQL(w SignalsOptions) (string, []any) {
	where, args := FilterSQL(Filter{Since: w.Since, Until: w.Until})
	if len(where) == 0 {
		return "true", nil
	}
	return strings.Join(where, " AND "), args
}

// LetterSummaryBetween implements letterStore.
func (s postgresLetters) LetterSummaryBetween(ctx context.Context, w SignalsOptions) ([]CategorySummary, error) {
	where, args := windowSQL(w)
	rows, err := s.q.Query(ctx, `
		SELECT reason_category,
		       count(*) FILTER (WHERE status IN ('dead', 'in_request')),
		       count(*),
		       coalesce(array_agg(DISTINCT source_queue ORDER BY source_queue)
		                FILTER (WHERE status IN ('dead', 'in_request')), '{}'),
		       min(dead_lettered_at) FILTER (WHERE status IN ('dead', 'in_request'))
		FROM `+lettersWithStatus+`
		WHERE `+where+`
		GROUP BY reason_category`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (CategorySummary, error) {
		var c CategorySummary
		var oldest *time.Time
		err := row.Scan(&c.Category, &c.Count, &c.Total, &c.Queues, &oldest)
		c.Systems = queueSystems(c.Queues)
		if oldest != nil {
			utc := oldest.UTC()
			c.OldestDeadLetteredAt = &utc
		}
		return c, err
	})
}

// LetterAttempts implements letterStore.
func (s postgresLetters) LetterAttempts(ctx context.Context, w SignalsOptions) ([]attemptTally, error) {
	sql := `
		SELECT reason_category, error_class, status, attempts, sum(letters)::bigint
		FROM expiryctl.dead_letter_class_tallies
		WHERE letters <> 0
		GROUP BY 1, 2, 3, 4`
	var args []any
	if !w.Since.IsZero() || !w.Until.IsZero() {
		var where string
		where, args = windowSQL(w)
		sql = `
		SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*)
		FROM ` + lettersWithStatus + `
		WHERE ` + where + `
		GROUP BY 1, 2, 3, 4`
	}
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (attemptTally, error) {
		var t attemptTally
		err := row.Scan(&t.Category, &t.ErrorClass, &t.Status, &t.Attempts, &t.Letters)
		return t, err
	})
}

// LetterArrivals implements letterStore. The whole hours of the 24-hour
// window come from dead_letter_arrival_tallies; its partial first hour and
// the last hour (which holds the 5-minute window and the partial last
// hour) from dead_letters_category_newest, from the index alone: naming
// every category (those the table's check allows) lets each category's
// range be read there.
func (s postgresLetters) LetterArrivals(ctx context.Context, end time.Time) ([]arrivalTally, error) {
	names := make([]string, 0, len(Categories()))
	for _, c := range Categories() {
		names = append(names, string(c))
	}
	// Hours are UTC hours, as the tallies' date_trunc(..., 'UTC') makes
	// them: Truncate works on absolute time.
	dayStart := end.Add(-dayWindow)
	lastHour, firstWholeHour := end.Truncate(time.Hour), dayStart.Truncate(time.Hour)
	if firstWholeHour.Before(dayStart) {
		firstWholeHour = firstWholeHour.Add(time.Hour)
	}
	rows, err := s.q.Query(ctx, `
		SELECT reason_category, sum(last_5m)::bigint, sum(last_1h)::bigint, sum(last_24h)::bigint
		FROM (
			SELECT reason_category,
			       count(*) FILTER (WHERE dead_lettered_at >= $2) AS last_5m,
			       count(*) AS last_1h,
			       count(*) FILTER (WHERE dead_lettered_at >= $5) AS last_24h
			FROM expiryctl.dead_letters
			WHERE reason_category = ANY ($7) AND dead_lettered_at >= $3 AND dead_lettered_at < $1
			GROUP BY reason_category
			UNION ALL
			SELECT reason_category, 0, 0, count(*)
			FROM expiryctl.dead_letters
			WHERE reason_category = ANY ($7) AND dead_lettered_at >= $4 AND dead_lettered_at < $6
			GROUP BY reason_category
			UNION ALL
			SELECT reason_category, 0, 0, sum(letters)
			FROM expiryctl.dead_letter_arrival_tallies
			WHERE dead_hour >= $6 AND dead_hour < $5
			GROUP BY reason_category
		) AS windows
		GROUP BY reason_category`,
		end, end.Add(-shortWindow), end.Add(-hourWindow), dayStart, lastHour, firstWholeHour, names)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (arrivalTally, error) {
		var t arrivalTally
		err := row.Scan(&t.Category, &t.Last5m, &t.Last1h, &t.Last24h)
		return t, err
	})
}

// overdueByCategory counts the overdue holds of each category and finds
// each one's earliest deadline without reading them all: the hours before
// the current one come from dead_letter_due_tallies, summed per category
// (a hash of hours × categories rows, no sort), the current hour's letters
// due before now() from the index dead_letter_states_waiting_due, and a
// category's earliest deadline from that index's range of the first hour
// the category has letters in, the category read from the index too.
const overdueByCategory = `
	WITH clock AS (
		SELECT now() AS now, date_trunc('hour', now(), 'UTC') AS hour
	), hours AS (
		SELECT t.reason_category AS category, sum(t.letters) AS n, min(t.due_hour) AS first
		FROM expiryctl.dead_letter_due_tallies t, clock
		WHERE t.due_hour < clock.hour AND t.letters > 0
		GROUP BY t.reason_category
		UNION ALL
		SELECT d.reason_category, count(*), min(clock.hour)
		FROM expiryctl.dead_letter_states d, clock
		WHERE d.status IN ('dead', 'in_request') AND d.due_at >= clock.hour AND d.due_at < clock.now
		GROUP BY d.reason_category
	), categories AS (
		SELECT category, sum(n)::bigint AS n, min(first) AS first FROM hours GROUP BY category
	)
	SELECT c.category, c.n,
	       (SELECT min(d.due_at) FROM expiryctl.dead_letter_states d
	         WHERE d.status IN ('dead', 'in_request') AND d.due_at >= c.first
	           AND d.due_at < least(c.first + interval '1 hour', clock.now) AND d.reason_category = c.category)
	FROM categories c, clock`

// overduePercentiles finds the lateness percentiles of the overdue holds
// a retry can fix (their categories are not among $1) without reading
// them all. Ordered from least to most late, the nearest-rank percentile p
// is the letter at rank ceil(p·n) (as percentile_disc computes it, in
// float8), which is position n − ceil(p·n) + 1 in due_at order: the
// running sums of the hours (dead_letter_due_tallies before the current
// one, the index for the current hour up to now()) say which hour holds
// that position, and the index gives that hour's letters in due_at order,
// skipping to it.
const overduePercentiles = `
	WITH clock AS (
		SELECT now() AS now, date_trunc('hour', now(), 'UTC') AS hour
	), current_hour AS MATERIALIZED (
		SELECT clock.hour AS lo, clock.now AS hi, (SELECT count(*) FROM expiryctl.dead_letter_states d
			WHERE d.status IN ('dead', 'in_request') AND d.due_at >= clock.hour AND d.due_at < clock.now
			  AND d.reason_category <> ALL ($1)) AS n
		FROM clock
	), hours AS (
		SELECT t.due_hour AS lo, t.due_hour + interval '1 hour' AS hi, sum(t.letters) AS n
		FROM expiryctl.dead_letter_due_tallies t, clock
		WHERE t.due_hour < clock.hour AND t.letters > 0 AND t.reason_category <> ALL ($1)
		GROUP BY t.due_hour
		UNION ALL
		SELECT lo, hi, n FROM current_hour
	), ranked AS (
		SELECT lo, hi, n, (sum(n) OVER (ORDER BY lo) - n)::bigint AS before, (sum(n) OVER ())::bigint AS total
		FROM hours WHERE n > 0
	), positions AS (
		SELECT q.p, r.lo, r.hi, r.n, r.before, r.total - ceil(q.p * r.total::float8)::bigint + 1 AS pos
		FROM ranked r CROSS JOIN (VALUES (0.5::float8), (0.99::float8)) AS q (p)
	), wanted AS (
		SELECT p, lo, hi, pos - before - 1 AS skip FROM positions WHERE pos > before AND pos <= before + n
	)
	SELECT (SELECT (SELECT d.due_at FROM expiryctl.dead_letter_states d
	                 WHERE d.status IN ('dead', 'in_request') AND d.due_at >= w.lo AND d.due_at < w.hi
	                   AND d.reason_category <> ALL ($1)
	                 ORDER BY d.due_at OFFSET w.skip LIMIT 1)
	          FROM wanted w WHERE w.p = 0.5),
	       (SELECT (SELECT d.due_at FROM expiryctl.dead_letter_states d
	                 WHERE d.status IN ('dead', 'in_request') AND d.due_at >= w.lo AND d.due_at < w.hi
	                   AND d.reason_category <> ALL ($1)
	                 ORDER BY d.due_at OFFSET w.skip LIMIT 1)
	          FROM wanted w WHERE w.p = 0.99)`

// LetterOverdue implements letterStore.
func (s postgresLetters) LetterOverdue(ctx context.Context, w SignalsOptions) (overdueTally, error) {
	permanent := PermanentCategoryNames()
	byCategory, percentiles, args := overdueByCategory, overduePercentiles, []any{permanent}
	var categoryArgs []any
	if !w.Since.IsZero() || !w.Until.IsZero() {
		where, windowArgs := windowSQL(w)
		overdue := `FROM ` + lettersWithStatus + `
		WHERE status IN ('dead', 'in_request') AND due_at < now() AND ` + where
		byCategory, categoryArgs = `SELECT reason_category, count(*), min(due_at) `+overdue+` GROUP BY reason_category`, windowArgs
		// The window's arguments come first: windowSQL numbers them from $1.
		percentiles = `SELECT percentile_disc(0.5::float8) WITHIN GROUP (ORDER BY due_at DESC),
		       percentile_disc(0.99::float8) WITHIN GROUP (ORDER BY due_at DESC)
		` + overdue + fmt.Sprintf(` AND reason_category <> ALL ($%d)`, len(windowArgs)+1)
		args = append(windowArgs, permanent)
	}
	rows, err := s.q.Query(ctx, byCategory, categoryArgs...)
	if err != nil {
		return overdueTally{}, err
	}
	var o overdueTally
	o.Categories, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OverdueCategory, error) {
		var c OverdueCategory
		return c, row.Scan(&c.Category, &c.Count, &c.OldestDueAt)
	})
	if err != nil {
		return overdueTally{}, err
	}
	err = s.q.QueryRow(ctx, percentiles, args...).Scan(&o.P50, &o.P99)
	return o, err
}

// LetterArrivalMinutes implements letterStore. Minutes are half open like
// LetterArrivals' windows, so the last five sum to its 5-minute count. It
// reads the hour's range of an index on dead_lettered_at (the planner takes
// dead_letters_newest: on 300k letters with 1,195 in the hour, 2 ms and 35
// buffers), so its cost follows the hour's arrivals, not the archive.
func (s postgresLetters) LetterArrivalMinutes(ctx context.Context, end time.Time) ([]minuteTally, error) {
	names := make([]string, 0, len(Categories()))
	for _, c := range Categories() {
		names = append(names, string(c))
	}
	rows, err := s.q.Query(ctx, `
		SELECT reason_category,
		       ceil(extract(epoch FROM ($1::timestamptz - dead_lettered_at)) / 60)::int - 1 AS ago,
		       count(*)
		FROM expiryctl.dead_letters
		WHERE reason_category = ANY ($3) AND dead_lettered_at >= $2 AND dead_lettered_at < $1
		GROUP BY 1, 2`,
		end, end.Add(-ArrivalMinuteBuckets*time.Minute), names)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (minuteTally, error) {
		var t minuteTally
		err := row.Scan(&t.Category, &t.Ago, &t.Letters)
		return t, err
	})
}
