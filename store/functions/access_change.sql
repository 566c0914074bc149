-- access_change is `expiryctl access grant|revoke`: it makes a login a
-- member of expiryctl's groups, or no longer one, and audits it. Only the
-- schema's owner may (rule owner-only): granting a group is granting what
-- the group may do. The login must exist and be able to log in: groups go
-- to people, never to other groups.
CREATE OR REPLACE FUNCTION expiryctl.access_change(actor text, login text, groups text[], grant_it boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text;
    g text;
    r record;
BEGIN
    IF NOT expiryctl.caller_is_owner() THEN
        PERFORM expiryctl.replay_refuse('owner-only', format(
            'only the schema owner manages access, and the login %s is not it', session_user));
    END IF;
    label := expiryctl.actor_label(actor);
    SELECT rolcanlogin, rolsuper INTO r FROM pg_roles WHERE rolname = login;
    IF NOT FOUND THEN
        PERFORM expiryctl.replay_refuse('login', format('there is no role %L: create the login first (CREATE ROLE %I LOGIN)', login, login));
    END IF;
    IF NOT r.rolcanlogin THEN
        PERFORM expiryctl.replay_refuse('login', format('%s is not a login role: grant groups to per-person logins', login));
    END IF;
    IF coalesce(cardinality(groups), 0) = 0 THEN
        PERFORM expiryctl.replay_refuse('groups', 'name at least one group: expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin');
    END IF;
    FOREACH g IN ARRAY groups LOOP
        IF g NOT IN ('expiryctl_ingester', 'expiryctl_operator', 'expiryctl_approver', 'expiryctl_auditor', 'expiryctl_admin') THEN
            PERFORM expiryctl.replay_refuse('groups', format(
                'unknown group %L: the groups are expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin', g));
        END IF;
        IF grant_it THEN
            EXECUTE format('GRANT %I TO %I', g, login);
        ELSE
            EXECUTE format('REVOKE %I FROM %I', g, login);
        END IF;
    END LOOP;
    PERFORM expiryctl.audit_write(label, CASE WHEN grant_it THEN 'access.grant' ELSE 'access.revoke' END,
        'login:' || login, jsonb_build_object('login', login, 'groups', to_jsonb(groups), 'superuser', r.rolsuper));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.access_change(actor text, login text, groups text[], grant_it boolean) FROM PUBLIC;
