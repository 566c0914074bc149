-- actor_label is the label an audit row and a request record beside the
-- login: the one the client declared, else the login itself. Under
-- identity_mode db-role a declared label must be the login.
CREATE OR REPLACE FUNCTION expiryctl.actor_label(declared text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN coalesce(btrim(declared), '') = '' THEN session_user::text
        WHEN declared = session_user THEN declared
        WHEN (SELECT identity_mode FROM expiryctl.policy WHERE singleton) = 'declared' THEN declared
        ELSE expiryctl.refuse_text('identity-db-role', format(
            'policy identity_mode is db-role: you act as the database role %s, and the label %s differs; drop --actor/EXPIRYCTL_ACTOR (or set it to %s)',
            session_user, declared, session_user))
    END
$$;

REVOKE ALL ON FUNCTION expiryctl.actor_label(declared text) FROM PUBLIC;
