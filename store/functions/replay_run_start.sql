-- replay_run_start moves an approved request to running (spending the
-- approval) or takes over a running one whose runner is gone, once a
-- replay's handler check passes: consumers is what the runner observed on
-- the queues the cohort's targets route to (see replay_handler_check),
-- recorded on the run's audit row; and once the runner captures every
-- dead-letter queue its open items came from (dlq_watch, see
-- replay_dlq_watch_check), unless the request said why it need not. Open items whose runs were all spent
-- (sends at replay_publish_bound, none with a recorded broker answer) fail
-- here, before a run can reach them: their letters may have reached the
-- broker that many times already, and only a new request sends them again;
-- a job store's items are spared (see replay_items_send): sending one again
-- retries its job at most once.
-- Returns whether it resumed and the label the run records.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb DEFAULT NULL, dlq_watch jsonb DEFAULT NULL)
RETURNS TABLE (resumed boolean, label text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    states jsonb;
    bound smallint := expiryctl.replay_publish_bound();
    spent jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF req.kind = 'replay' AND req.status IN ('approved', 'running') AND NOT req.same_handler_ok THEN
        PERFORM expiryctl.replay_handler_check(request, req.failed_under, consumers);
    END IF;
    IF req.kind = 'replay' AND req.status IN ('approved', 'running') THEN
        PERFORM expiryctl.replay_dlq_watch_check(request, req.unwatched_why, dlq_watch);
    END IF;
    CASE req.status
    WHEN 'approved' THEN
        UPDATE expiryctl.replay_requests SET status = 'running', started_db_role = session_user WHERE id = request
        RETURNING * INTO req;
        resumed := false;
    WHEN 'running' THEN
        resumed := true;
    WHEN 'pending' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is pending approval: ask an approver to run `expiryctl replay approve %s`', request, request));
    WHEN 'halted' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s was halted (%s): it needs a new approval before it runs again: ask an approver to run `expiryctl replay approve %s`',
            request, req.halt_reason, request));
    ELSE
        PERFORM expiryctl.replay_refuse('terminal', format(
            'replay request %s is %s: it is over and cannot run; make a new request with `expiryctl replay request`', request, req.status));
    END CASE;
    WITH failed AS (
        UPDATE expiryctl.replay_items i SET state = 'failed', last_error = format(
                   'sent to the broker up to %s times under replay request %s without a recorded answer, the most one request may (rule publish-bound): it is not published again; make a new request with `expiryctl replay request` to send its letter',
                   bound, request)
         WHERE i.request_id = request AND i.state IN ('pending', 'publishing') AND i.sends >= bound
           AND NOT EXISTS (SELECT 1 FROM expiryctl.dead_letters d JOIN expiryctl.queue_systems q ON q.name = d.source_system
                            WHERE d.id = i.dead_letter_id AND q.retries_in_place)
        RETURNING i.dead_letter_id, i.ordinal)
    SELECT jsonb_agg(dead_letter_id ORDER BY ordinal) INTO spent FROM failed;
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO states
      FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items WHERE request_id = request GROUP BY state) s;
    PERFORM expiryctl.audit_write(label, 'replay.run.start', 'replay_request:' || request, jsonb_build_object(
        'resume', resumed, 'approval', req.approvals, 'approved_by', req.reviewed_by,
        'approved_db_role', req.reviewed_db_role, 'kind', req.kind, 'items', req.item_count, 'states', states,
        'rate', req.rate, 'canary', req.canary, 'fresh_key', req.fresh_key,
        'same_handler_ok', req.same_handler_ok, 'failed_under', req.failed_under, 'consumers', consumers,
        'dlq_watch', dlq_watch, 'unwatched_why', req.unwatched_why,
        'stop_conditions', jsonb_build_object('failure_ratio', req.stop_failure_ratio, 'queue_depth', req.stop_queue_depth,
            'redead_ratio', req.stop_redead_ratio, 'canary_window_seconds', extract(epoch FROM req.canary_window)))
        || CASE WHEN spent IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('publish_bound', bound, 'publish_bound_failed', spent) END);
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb, dlq_watch jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb, dlq_watch jsonb) TO expiryctl_operator;
