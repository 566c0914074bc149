-- replay_cancel is `replay cancel`: an operator ends a request that is not
-- over yet (the request guard refuses the rest). The letters it held are
-- free again (replay_request_ended).
CREATE OR REPLACE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
BEGIN
    PERFORM expiryctl.require_role('replay cancel', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    UPDATE expiryctl.replay_requests SET status = 'cancelled', halt_reason = 'cancelled by ' || label WHERE id = request;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || request,
                                  jsonb_build_object('why', coalesce(why, '')));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) TO expiryctl_operator;
