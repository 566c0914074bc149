-- replay_discard_window carries out a running discard for the items of
-- ordinals lo..hi: each is confirmed and its letter marked discarded,
-- nothing is published. Only the request's runner (replay_run_lease) may.
-- Returns the request's status (when it is not running, nothing moved)
-- and how many items it decided.
CREATE OR REPLACE FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) RETURNS TABLE(status text, decided integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    k text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT r.status, r.kind INTO status, k FROM expiryctl.replay_requests r WHERE r.id = request FOR SHARE;
    decided := 0;
    IF status IS DISTINCT FROM 'running' THEN
        status := coalesce(status, 'missing');
        RETURN NEXT;
        RETURN;
    END IF;
    IF k <> 'discard' THEN
        PERFORM expiryctl.replay_refuse('kind', format('replay request %s is a replay: it publishes, it does not discard', request));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    WITH done AS (
        UPDATE expiryctl.replay_items SET state = 'confirmed', confirmed_at = now(), attempts = attempts + 1, open = false
         WHERE request_id = request AND ordinal BETWEEN lo AND hi AND state IN ('pending', 'publishing')
        RETURNING dead_letter_id)
    SELECT coalesce(array_agg(dead_letter_id), '{}') INTO ids FROM done;
    UPDATE expiryctl.dead_letter_states s SET status = 'discarded' WHERE s.dead_letter_id = ANY (ids) AND s.status = 'in_request';
    decided := cardinality(ids);
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) TO expiryctl_operator;
