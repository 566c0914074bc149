package pgboss

import "strings"

// The statements the source, the retrier and the queue checks run on
// pg-boss's tables, beside the topology's: every statement on pg-boss's
// tables is in a postgres file of its own. {job} and {queue} stand for
// pg-boss's job and queue tables in the reference's schema (Ref.sql).
// Every one reads or writes the parent job table by queue name, which
// PostgreSQL prunes to the queue's partition.

// sql is stmt on the reference's pg-boss schema.
func (r Ref) sql(stmt string) string {
	return strings.NewReplacer("{job}", r.table("job"), "{queue}", r.table("queue")).Replace(stmt)
}

// probeSQL reads no row but every column the driver reads, of both
// tables, so that a database without pg-boss, or with a pg-boss older
// than the columns, says so at once.
const probeSQL = `SELECT blocked, ` + jobColumns + ` FROM {job} LIMIT 0`

// probeQueueSQL reads no row of the queue table.
const probeQueueSQL = `SELECT name FROM {queue} LIMIT 0`

// pageSQL reads one page of queue $1's failed jobs after a key ($2
// completed_on, $3 id), $4 of them, in order: pg-boss's index on (name,
// completed_on) of the finished jobs serves it.
const pageSQL = `SELECT ` + jobColumns + ` FROM {job}
	WHERE name = $1 AND state = 'failed' AND completed_on >= $2 AND (completed_on, id) > ($2, $3::uuid)
	ORDER BY completed_on, id LIMIT $4`

// readyAheadSQL counts queue $1's failed jobs after the source's cursor
// ($2 completed_on, $3 id).
const readyAheadSQL = `SELECT count(*) FROM {job}
	WHERE name = $1 AND state = 'failed' AND completed_on >= $2 AND (completed_on, id) > ($2, $3::uuid)`

// readyBehindSQL lists the keys of queue $1's failed jobs within the
// lookback ($2) behind the cursor ($3, $4).
const readyBehindSQL = `SELECT completed_on, id::text FROM {job}
	WHERE name = $1 AND state = 'failed' AND completed_on >= $2 AND (completed_on, id) <= ($3, $4::uuid)`

// lockJobSQL locks job $2 of queue $1 and reads what tells whether it is
// still the failure a letter captured, and the marks a replay left on it.
const lockJobSQL = `SELECT state::text, completed_on, trace_context -> '` + MarksKey + `'
	FROM {job} WHERE name = $1 AND id = $2::uuid FOR UPDATE`

// retryJobSQL retries failed job $2 of queue $1 as pg-boss's own
// retry(name, id) does (plans.retryJobs, pg-boss 12.38.1): state retry,
// one more try (retry_limit + 1), completed_on cleared, start_after now
// unless it is later. Two things more, in the same statement: the replay's
// marks ($3) under MarksKey in trace_context, and keep_until moved as far
// as start_after moved, as pg-boss's own update() moves it: keep_until is
// when a job still waiting expires, and pg-boss's maintenance deletes a
// waiting job past it, so a retry of a job that failed late in its
// retention would otherwise be deleted before any worker took it.
const retryJobSQL = `UPDATE {job}
	SET state = 'retry',
		retry_limit = retry_limit + 1,
		completed_on = NULL,
		start_after = GREATEST(start_after, now()),
		keep_until = keep_until + GREATEST(now() - start_after, interval '0'),
		trace_context = jsonb_set(coalesce(trace_context, '{}'::jsonb), '{` + MarksKey + `}', $3::jsonb)
	WHERE name = $1 AND id = $2::uuid AND state = 'failed'`

// queueDepthSQL counts queue $1's jobs a worker's fetch would take now
// (state created or retry, not blocked by a flow, start_after come), and
// says whether pg-boss knows the queue.
const queueDepthSQL = `SELECT
		(SELECT count(*) FROM {job} WHERE name = $1 AND state < 'active' AND NOT blocked AND start_after <= now()),
		EXISTS (SELECT 1 FROM {queue} WHERE name = $1)`

// queueRowSQL says whether pg-boss knows queue $1: createQueue writes its
// row, and no job can be sent to a queue without one.
const queueRowSQL = `SELECT EXISTS (SELECT 1 FROM {queue} WHERE name = $1)`

// queueNamesSQL lists the queues pg-boss knows, at most $1 of them.
const queueNamesSQL = `SELECT name FROM {queue} ORDER BY name LIMIT $1`
