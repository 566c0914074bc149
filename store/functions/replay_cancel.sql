-- replay_cancel is `replay cancel`: an operator ends a request that is not
-- over yet (the request guard refuses the rest). The letters it held are
-- free again (replay_request_ended). A cancelled request is over too: it is
-- refused here, since to the guard a cancelled -> cancelled update changes
-- no status, and would let a second cancel rewrite who cancelled it.
CREATE OR REPLACE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay cancel', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF req.status = 'cancelled' THEN
        PERFORM expiryctl.replay_refuse('cancel', format('replay request %s is cancelled and cannot be cancelled (%s)',
            request, coalesce(req.halt_reason, 'cancelled')));
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'cancelled', halt_reason = 'cancelled by ' || label WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || request,
                                  jsonb_build_object('why', coalesce(why, '')));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) TO expiryctl_operator;
