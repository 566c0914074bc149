-- replay_run_watch_owed is what a run of request owes its watch when it
-- starts or resumes: the items confirmed under the current approval (a
-- run resumed after a crash is the same run, so its earlier legs'
-- confirms count), how many of their jobs died again and were captured,
-- and how much of the watch window after the last confirm is left, by
-- the database's clock. A run killed in its watch window and resumed
-- watches the rest of it, and judges the re-dead ratio over the whole
-- run, not only over what its last leg published.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_watch_owed(request bigint)
RETURNS TABLE (confirmed integer, came_back integer, window_left interval)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH run_items AS (
        SELECT i.dead_letter_id, i.confirmed_at, r.canary_window
          FROM expiryctl.replay_requests r
          JOIN expiryctl.replay_items i ON i.request_id = r.id
         WHERE r.id = request AND i.state = 'confirmed' AND i.confirmed_at >= r.reviewed_at)
    SELECT (SELECT count(*)::integer FROM run_items),
           (SELECT count(*)::integer FROM expiryctl.dead_letters n
              JOIN run_items ri ON ri.dead_letter_id = n.previous_id
             WHERE n.replay_request_id = request),
           coalesce((SELECT greatest(max(confirmed_at + canary_window) - now(), interval '0') FROM run_items),
                    interval '0')
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_watch_owed(request bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_watch_owed(request bigint) TO expiryctl_operator;
