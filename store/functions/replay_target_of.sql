-- replay_target_of is where a replay publishes a letter: by default back
-- to the work queue it failed in, through the default exchange, so that no
-- other queue bound to its original exchange gets a copy; with
-- via_exchange through its original exchange and routing key. The work
-- queue is the one its x-death names (origin_queue, a retry queue's work
-- queue), else the request's own target, else the work queue of the
-- dead-letter queue it was captured from when that is named as the expiry
-- topology names them (Q.dlq for Q): a worker that dead-letters a job on
-- its first failure publishes it there itself, and no x-death names Q. rk
-- is NULL when there is none. The runner reads each item's target from
-- here, and the request freezes the cohort's with it. A job store's
-- letter (a system that retries in place, queue_systems.retries_in_place:
-- its queue begins with that system's prefix) goes nowhere else: the job
-- is retried where it is, in the queue it was captured from. It returns a
-- set and sets no search_path (naming every operator and function with its
-- schema instead), so that the planner inlines it into the runner's item
-- reads (see work_queue_of); it reads queue_systems, with the caller's
-- privileges (every group may read it), so it is STABLE, which inlining
-- allows.
CREATE OR REPLACE FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text,
    source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) RETURNS TABLE(e text, rk text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN j.in_place THEN ''
                WHEN via_exchange AND (original_exchange IS NOT NULL OR original_routing_key IS NOT NULL) THEN coalesce(original_exchange, '')
                WHEN coalesce(origin_queue, '') OPERATOR(pg_catalog.<>) '' THEN ''
                WHEN coalesce(to_exchange, '') OPERATOR(pg_catalog.<>) '' OR coalesce(to_routing_key, '') OPERATOR(pg_catalog.<>) ''
                    THEN coalesce(to_exchange, '')
                WHEN source_queue OPERATOR(pg_catalog.~) '.\.dlq$' THEN '' END,
           CASE WHEN j.in_place THEN source_queue
                WHEN via_exchange AND (original_exchange IS NOT NULL OR original_routing_key IS NOT NULL) THEN coalesce(original_routing_key, '')
                WHEN coalesce(origin_queue, '') OPERATOR(pg_catalog.<>) '' THEN expiryctl.work_queue_of(origin_queue)
                WHEN coalesce(to_exchange, '') OPERATOR(pg_catalog.<>) '' OR coalesce(to_routing_key, '') OPERATOR(pg_catalog.<>) ''
                    THEN coalesce(to_routing_key, '')
                WHEN source_queue OPERATOR(pg_catalog.~) '.\.dlq$' THEN expiryctl.work_queue_of(source_queue) END
      FROM (SELECT EXISTS (SELECT FROM expiryctl.queue_systems s
                            WHERE s.retries_in_place AND s.queue_prefix OPERATOR(pg_catalog.<>) ''
                              AND pg_catalog.starts_with(source_queue, s.queue_prefix)) AS in_place) j
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
