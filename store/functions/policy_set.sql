-- policy_set is `policy set`: for the owner it applies the change at once;
-- for an admin it records a proposal that another admin must approve.
-- Returns the proposal's id (null when applied) and whether it applied.
CREATE OR REPLACE FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text)
RETURNS TABLE (change_id bigint, applied boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy set', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    IF changes IS NULL OR jsonb_typeof(changes) <> 'object' OR changes = '{}' THEN
        PERFORM expiryctl.replay_refuse('policy-keys', 'name at least one KEY=VALUE');
    END IF;
    IF expiryctl.caller_is_owner() THEN
        SELECT * INTO r FROM expiryctl.policy_apply(changes, label);
        PERFORM expiryctl.audit_write(label, 'policy.set', 'policy', jsonb_build_object(
            'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
            'why', coalesce(why, ''), 'by_owner', true, 'before', r.before, 'after', r.after));
        change_id := NULL;
        applied := true;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Checked now, so that the proposer hears of a bad value, and again
    -- when it applies.
    BEGIN
        PERFORM expiryctl.policy_apply(changes, label);
        RAISE EXCEPTION USING ERRCODE = 'EG099';
    EXCEPTION WHEN SQLSTATE 'EG099' THEN
        NULL;
    END;
    INSERT INTO expiryctl.policy_changes (changes, why, proposed_by) VALUES (changes, coalesce(why, ''), label)
    RETURNING id INTO change_id;
    PERFORM expiryctl.audit_write(label, 'policy.propose', 'policy_change:' || change_id, jsonb_build_object(
        'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
        'why', coalesce(why, '')));
    applied := false;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text) TO expiryctl_admin;
