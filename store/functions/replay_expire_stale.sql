-- replay_expire_stale marks requests whose review or approval window has
-- passed expired, each with its audit row. Anyone in a group may call it:
-- what is stale is the database's clock's decision.
CREATE OR REPLACE FUNCTION expiryctl.replay_expire_stale(actor text) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('expiring stale requests', 'expiryctl_operator', 'expiryctl_approver',
                                   'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    FOR rid IN UPDATE expiryctl.replay_requests SET status = 'expired'
                WHERE (status = 'pending' AND expires_at <= now()) OR (status = 'approved' AND approval_expires_at <= now())
                RETURNING id LOOP
        PERFORM expiryctl.audit_write(label, 'replay.expire', 'replay_request:' || rid,
                                      '{"reason": "review or approval window passed"}');
        RETURN NEXT rid;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
