-- replay_items_record writes what the broker answered for a window of a
-- running request's items (ordinals lo..hi): confirmed ones close and
-- their letters become replayed; failed ones keep their error. Only
-- items marked publishing move, and only the request's runner
-- (replay_run_lease) may record.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- The request's row first, as replay_items_mark and replay_run_halt
    -- take it: a cancel locks that row, then (replay_request_ended) the
    -- letters and the items, so a recorder that took the items and then
    -- the letters could wait on a cancel that waits on it.
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(confirmed) > 0 THEN
        -- A confirmed item is done with its letter, so it no longer holds
        -- it: closing it here spares the request's end a second write.
        WITH done AS (
            UPDATE expiryctl.replay_items i SET state = 'confirmed', attempts = i.attempts + 1,
                   last_error = NULL, confirmed_at = now(), open = false
             WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (confirmed)
               AND i.state = 'publishing'
            RETURNING i.dead_letter_id),
        replayed AS (
            UPDATE expiryctl.dead_letter_states s SET status = 'replayed' FROM done
             WHERE s.dead_letter_id = done.dead_letter_id AND s.status = 'in_request')
        SELECT count(*) INTO moved FROM done;
        IF moved <> cardinality(confirmed) THEN
            RAISE EXCEPTION 'recorded % of % confirms for replay request %: the items changed under the runner', moved, cardinality(confirmed), request;
        END IF;
    END IF;
    IF cardinality(failed) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', attempts = i.attempts + 1, last_error = nullif(u.why, '')
          FROM unnest(failed, failed_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (failed)
           AND i.dead_letter_id = u.id AND i.state = 'publishing';
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(failed) THEN
            RAISE EXCEPTION 'recorded % of % failed publishes for replay request %: the items changed under the runner', moved, cardinality(failed), request;
        END IF;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) TO expiryctl_operator;
