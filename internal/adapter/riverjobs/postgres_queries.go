package riverjobs

// The statements the source and the retrier read river_job with, beyond
// those built from jobColumns: kept here, beside the topology's, so that
// every statement on River's tables is in a postgres file of its own.

// queueDepthSQL counts a queue's jobs waiting to be worked ($1 the queue),
// and whether River knows the queue.
const queueDepthSQL = `SELECT
		(SELECT count(*) FROM river_job WHERE queue = $1 AND (state = 'available'
			OR (state IN ('retryable', 'scheduled') AND scheduled_at <= now()))),
		EXISTS (SELECT 1 FROM river_queue WHERE name = $1)
			OR EXISTS (SELECT 1 FROM river_job WHERE queue = $1 AND state IN
				('available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'))`

// readyAheadSQL counts the jobs in the captured states ($1) of queue $2
// after the source's cursor ($3 finalized_at, $4 id).
const readyAheadSQL = `SELECT count(*) FROM river_job
		WHERE state = ANY($1::text[]::river_job_state[]) AND queue = $2 AND finalized_at >= $3 AND (finalized_at, id) > ($3, $4)`

// readyBehindSQL lists the keys of the jobs in the captured states ($1)
// of queue $2 within the lookback ($3) behind the cursor ($4, $5).
const readyBehindSQL = `SELECT finalized_at, id FROM river_job
		WHERE state = ANY($1::text[]::river_job_state[]) AND queue = $2 AND finalized_at >= $3 AND (finalized_at, id) <= ($4, $5)`

// The statements that tell whether River knows a queue, and which queues
// it does know, for QueueMissingError. Each walks River's index on
// (state, queue, …) through every state of river_job_state, rather than
// the whole table: a River database keeps every completed job for a day.

// queueHasJobSQL says whether any job of queue $1 is in river_job, in
// any state.
const queueHasJobSQL = `SELECT EXISTS (SELECT 1 FROM river_job
		WHERE state = ANY (enum_range(NULL::river_job_state)) AND queue = $1)`

// queueTableReadableSQL says whether the login may read river_queue,
// which a capture login need not (docs/river.md).
const queueTableReadableSQL = `SELECT coalesce(has_table_privilege(to_regclass('river_queue'), 'SELECT'), false)`

// queueRowSQL says whether river_queue has a row for queue $1: a River
// client working the queue keeps one, jobs or none.
const queueRowSQL = `SELECT EXISTS (SELECT 1 FROM river_queue WHERE name = $1)`

// jobQueuesSQL lists the queues that hold jobs, at most $1 of them, by a
// skip scan of River's (state, queue, …) index: one probe per queue and
// state, never a read of every job.
const jobQueuesSQL = `WITH RECURSIVE walk (state, queue) AS (
		SELECT s, (SELECT min(queue) FROM river_job WHERE state = s)
		FROM unnest(enum_range(NULL::river_job_state)) AS s
		UNION ALL
		SELECT w.state, (SELECT min(j.queue) FROM river_job j WHERE j.state = w.state AND j.queue > w.queue)
		FROM walk w WHERE w.queue IS NOT NULL
	)
	SELECT DISTINCT queue FROM walk WHERE queue IS NOT NULL LIMIT $1`

// queueRowsSQL lists the queues river_queue names, at most $1 of them.
const queueRowsSQL = `SELECT name FROM river_queue ORDER BY name LIMIT $1`
