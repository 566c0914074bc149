-- replay_canary_record writes a running request's canary milestones: a
-- resumed run reads them to know how long the canary already waited, or
-- that it passed, so only the request's runner writes them.
CREATE OR REPLACE FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: a canary belongs to a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    PERFORM expiryctl.audit_write(label, CASE WHEN passed THEN 'replay.canary.pass' ELSE 'replay.canary.start' END,
        'replay_request:' || request, coalesce(details, '{}') || jsonb_build_object('approval', req.approvals));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb) TO expiryctl_operator;
