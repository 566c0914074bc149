-- replay_watched_queues are the dead-letter queues a run of request must
-- capture to see its jobs die again: those its open items' letters came
-- from, and those of the items it confirmed under its current approval
-- whose watch window (the request's canary window after the confirm) is
-- still open. A run resumed after its last publish still owes those
-- items their watch; a run that starts after every window closed owes
-- none.
CREATE OR REPLACE FUNCTION expiryctl.replay_watched_queues(request bigint) RETURNS SETOF text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT DISTINCT d.source_queue
      FROM expiryctl.replay_requests r
      JOIN expiryctl.replay_items i ON i.request_id = r.id
      JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
     WHERE r.id = request
       AND (i.state IN ('pending', 'publishing')
            OR (i.state = 'confirmed' AND i.confirmed_at >= r.reviewed_at
                AND i.confirmed_at + r.canary_window > now()))
     ORDER BY 1
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_watched_queues(request bigint) TO expiryctl_operator, expiryctl_approver, expiryctl_admin, expiryctl_auditor;
