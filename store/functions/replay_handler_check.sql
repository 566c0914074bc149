-- replay_handler_check refuses a replay's start when the consumers the
-- runner observed cannot be shown to run a handler other than the one the
-- cohort failed under. consumers is
--   {"queues": [{"queue": Q, "consumers": [{"tag": T, "connection": C, "handler_version": V}]}],
--    "unavailable": WHY}
-- with "unavailable" set when the runner could not read them, and a queue
-- for each queue the cohort's targets route to. Over all their consumers:
-- none at all is no-consumer; none advertising a version the cohort did
-- not fail under is same-handler (a consumer that advertises none proves
-- nothing). A queue without a consumer beside one with the fix (an audit
-- tap bound to the same key) is no reason to refuse. replay's
-- HandlerVerdict judges a run's later checks the same way.
CREATE OR REPLACE FUNCTION expiryctl.replay_handler_check(request bigint, failed_under jsonb, consumers jsonb) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    running text;
    queues text;
    hint text := 'or, if replaying onto the same handler is what you mean, make a new request with --same-handler-ok "why"';
BEGIN
    IF consumers IS NULL OR jsonb_typeof(consumers) <> 'object' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: the runner did not say which consumers its queues have, so nothing shows that the handler changed since the cohort failed: '
            || 'run it with `expiryctl replay run %s`, which reads them from RabbitMQ''s management API, %s', request, request, hint));
    END IF;
    IF coalesce(consumers->>'unavailable', '') <> '' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: cannot read the consumers of its queues (%s), so nothing shows that the handler changed since the cohort failed: '
            || 'fix --management-url / EXPIRYCTL_MANAGEMENT_URL and run it again, %s', request, left(consumers->>'unavailable', 500), hint));
    END IF;
    IF jsonb_typeof(consumers->'queues') IS DISTINCT FROM 'array' OR jsonb_array_length(consumers->'queues') = 0 THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: its targets route to no queue, so no consumer would take the replayed jobs: check the bindings, %s', request, hint));
    END IF;
    SELECT string_agg(q->>'queue', ', ') INTO queues FROM jsonb_array_elements(consumers->'queues') q;
    SELECT string_agg(DISTINCT CASE WHEN coalesce(c->>'handler_version', '') = '' THEN '(none advertised)' ELSE c->>'handler_version' END, ', ')
      INTO running
      FROM jsonb_array_elements(consumers->'queues') q
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c;
    IF running IS NULL THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: queue %s has no consumer, so nothing would take the replayed jobs: start the fixed worker first, %s',
            request, queues, hint));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(consumers->'queues') q
                    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c
                    WHERE coalesce(c->>'handler_version', '') <> '' AND NOT (failed_under ? (c->>'handler_version'))) THEN
        SELECT string_agg(CASE WHEN key = '' THEN '(none named)' ELSE key END || ': ' || value || ' letters', ', ' ORDER BY key)
          INTO failed FROM jsonb_each_text(failed_under);
        PERFORM expiryctl.replay_refuse('same-handler', format(
            'replay request %s: every consumer of queue %s runs a handler version the cohort failed under, or advertises none (consumed now by %s; failed under %s): '
            || 'replaying now repeats the failure. Deploy the fix (a worker whose connection advertises a new handler-version) and run it again, %s',
            request, queues, running, coalesce(failed, 'nothing'), hint));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_handler_check(request bigint, failed_under jsonb, consumers jsonb) FROM PUBLIC;
