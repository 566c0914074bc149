-- replay_run_halt halts a running request on a stop condition, putting
-- the items its runner says it marked and never sent back to pending (their
-- sends still counted, as replay_run_interrupted keeps them). Returns the
-- status the request had when it was not running (then nothing changed),
-- else 'halted'.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(unsent) > 0 THEN
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'halted', halt_reason = reason WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.halt', 'replay_request:' || request, details);
    RETURN 'halted';
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb) TO expiryctl_operator;
