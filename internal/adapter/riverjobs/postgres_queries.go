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
