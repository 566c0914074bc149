-- replay_run_interrupted records a run that stops without a status change
-- (the next run resumes it). Items it marked publishing but never
-- published go back to pending, their sends still counted: whether a
-- runner that says so really did not publish one is nothing the database
-- can know, so the bound on publishes (replay_items_send) never trusts it.
-- Only the request's runner records it, and only of a request a run was
-- under (running, or cancelled beneath it).
CREATE OR REPLACE FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF st NOT IN ('running', 'cancelled') THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: no run of it can have been interrupted', request, st));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(unsent) > 0 THEN
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.run.interrupted', 'replay_request:' || request, details, 'error');
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) TO expiryctl_operator;
