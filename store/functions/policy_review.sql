-- policy_review applies (approve) or drops (reject) a pending proposal; the
-- reviewer's login must differ from the proposer's.
CREATE OR REPLACE FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    c expiryctl.policy_changes%ROWTYPE;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy ' || decision, 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT * INTO c FROM expiryctl.policy_changes WHERE id = change FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('policy_change', change);
    END IF;
    IF c.status <> 'pending' THEN
        PERFORM expiryctl.replay_refuse('single-review', format('policy change %s is %s: it was already reviewed by %s',
            change, c.status, coalesce(c.reviewed_by, 'nobody')));
    END IF;
    IF c.proposed_db_role = session_user THEN
        PERFORM expiryctl.replay_refuse('four-eyes', format(
            'the login %s proposed policy change %s and cannot review it, whatever --actor says: another admin must', session_user, change));
    END IF;
    IF decision = 'approve' THEN
        SELECT * INTO r FROM expiryctl.policy_apply(c.changes, label);
        UPDATE expiryctl.policy_changes SET status = 'applied', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.approve', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'proposed_db_role', c.proposed_db_role,
            'why', coalesce(why, ''), 'before', r.before, 'after', r.after));
    ELSIF decision = 'reject' THEN
        UPDATE expiryctl.policy_changes SET status = 'rejected', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.reject', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'why', coalesce(why, '')));
    ELSE
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text) TO expiryctl_admin;
