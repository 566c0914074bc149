-- replay_items_mark commits the runner's decision for a window of items
-- (ordinals lo..hi): skipped, failed, or publishing (about to be
-- published). Returns the request's status; when it is not running,
-- nothing moved.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_mark(
    request bigint, lo integer, hi integer, publish bigint[],
    skip bigint[], skip_why text[], fail bigint[], fail_why text[])
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    st text;
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- FOR SHARE: a cancel waits for this window's commit, and the runner
    -- sees the cancel at its next check.
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(skip) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'skipped', last_error = u.why
          FROM unnest(skip, skip_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(skip) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to skipped: the items changed under the runner', moved, cardinality(skip), request;
        END IF;
    END IF;
    IF cardinality(fail) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', last_error = u.why, attempts = i.attempts + 1
          FROM unnest(fail, fail_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(fail) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to failed: the items changed under the runner', moved, cardinality(fail), request;
        END IF;
    END IF;
    IF cardinality(publish) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'publishing'
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (publish)
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(publish) THEN
            RAISE EXCEPTION 'marked % of % items of replay request % publishing: the items changed under the runner', moved, cardinality(publish), request;
        END IF;
    END IF;
    RETURN st;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]) TO expiryctl_operator;
