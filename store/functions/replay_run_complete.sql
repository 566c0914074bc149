-- replay_run_complete completes a running request once none of its items
-- is left to publish, recording every item's outcome. Returns the status
-- the request had when it was not running, else 'completed'.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    st text;
    open_n integer;
    outcome jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    SELECT count(*) FILTER (WHERE state IN ('pending', 'publishing')),
           jsonb_build_object(
               'confirmed', coalesce(jsonb_agg(dead_letter_id ORDER BY ordinal) FILTER (WHERE state = 'confirmed'), '[]'),
               'skipped', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'skipped'), '[]'),
               'failed', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'failed'), '[]'))
      INTO open_n, outcome
      FROM expiryctl.replay_items WHERE request_id = request;
    IF open_n > 0 THEN
        RAISE EXCEPTION 'replay request % still has % items not yet published: not completing it', request, open_n;
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'completed' WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.complete', 'replay_request:' || request, coalesce(details, '{}') || outcome);
    RETURN 'completed';
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb) TO expiryctl_operator;
