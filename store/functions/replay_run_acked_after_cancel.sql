-- replay_run_acked_after_cancel records the items of a cancelled request
-- that the broker confirmed while the cancel committed: they were
-- published, so their letters are marked replayed and the run's audit row
-- names them. Only the request's runner (replay_run_lease) may, and only of
-- a request that was cancelled.
CREATE OR REPLACE FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    ids bigint[];
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF st <> 'cancelled' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s, not cancelled: its confirmed items are recorded as they are confirmed', request, st));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    SELECT coalesce(array_agg(i.dead_letter_id ORDER BY i.dead_letter_id), '{}') INTO ids
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
     WHERE i.request_id = request AND i.dead_letter_id = ANY (acked) AND i.state = 'publishing'
       AND r.status = 'cancelled';
    UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE dead_letter_id = ANY (ids) AND status = 'dead';
    PERFORM expiryctl.audit_write(label, 'replay.run.cancelled', 'replay_request:' || request, jsonb_build_object(
        'published_before_cancel_seen', to_jsonb(ids),
        'note', 'published and acked while the cancel committed; their letters are marked replayed'));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) TO expiryctl_operator;
