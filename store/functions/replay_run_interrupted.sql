-- replay_run_interrupted records a run that stops without a status change
-- (the next run resumes it). Items it marked publishing but never
-- published go back to pending.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    IF cardinality(unsent) > 0 THEN
        PERFORM expiryctl.replay_run_lease(request);
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.run.interrupted', 'replay_request:' || request, details, 'error');
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) TO expiryctl_operator;
