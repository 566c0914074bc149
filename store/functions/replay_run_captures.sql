-- replay_run_captures says whether the caller's login holds, in a standing
-- session, the runner lease of an approved or running replay whose cohort
-- came from every queue of queues: a run captures the dead-letter queues of
-- its own cohort (ingest_letters), so that it sees its jobs die again, and
-- no other queue.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_captures(queues text[]) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM expiryctl.replay_runner_leases l
          JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
          JOIN expiryctl.replay_requests r ON r.id = l.request_id
         WHERE l.login = session_user AND r.kind = 'replay' AND r.status IN ('approved', 'running')
           AND NOT EXISTS (SELECT 1 FROM unnest(queues) AS q(name)
                            WHERE NOT EXISTS (SELECT 1 FROM expiryctl.replay_items i
                                                JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                                               WHERE i.request_id = r.id AND d.source_queue = q.name)))
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_captures(queues text[]) FROM PUBLIC;
