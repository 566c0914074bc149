-- replay_dlq_watch_check refuses a replay's start (rule dlq-unwatched)
-- when the runner does not watch every dead-letter queue it owes a watch
-- (replay_watched_queues), and the request gave no reason why it need
-- not: a run that cannot see its jobs die again cannot stop on them, and
-- would say completed over a queue of new dead letters. dlq_watch is
--   {"queues": [{"queue": Q, "by": "run"} | {"queue": Q, "unwatched": WHY}]}
-- as the runner saw it when it started its captures; it is recorded on the
-- run's audit row.
CREATE OR REPLACE FUNCTION expiryctl.replay_dlq_watch_check(request bigint, unwatched_why text, dlq_watch jsonb) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    missing text;
BEGIN
    IF unwatched_why IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT string_agg(format('%s (%s)', q.source_queue,
               coalesce(nullif(w.unwatched, ''), 'the runner did not say it captures it')), ', ' ORDER BY q.source_queue)
      INTO missing
      FROM expiryctl.replay_watched_queues(request) AS q(source_queue)
      LEFT JOIN LATERAL (SELECT e->>'unwatched' AS unwatched, e->>'by' AS by
                           FROM jsonb_array_elements(CASE WHEN jsonb_typeof(dlq_watch->'queues') = 'array'
                                                          THEN dlq_watch->'queues' ELSE '[]' END) e
                          WHERE e->>'queue' = q.source_queue LIMIT 1) w ON true
     WHERE coalesce(w.by, '') = '';
    IF missing IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('dlq-unwatched', format(
            'replay request %s: the run cannot see its jobs die again, because it does not capture the dead-letter queue %s: '
            || 'run it with `expiryctl replay run %s`, which captures them while it runs, once the queue exists and its server answers; '
            || 'or, if its outcomes are watched some other way, make a new request with --unwatched "why"',
            request, missing, request));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_dlq_watch_check(request bigint, unwatched_why text, dlq_watch jsonb) FROM PUBLIC;
