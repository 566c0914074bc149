-- require_role refuses (rule "role") a caller who is in none of groups.
CREATE OR REPLACE FUNCTION expiryctl.require_role(action text, variadic groups text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT expiryctl.caller_in(VARIADIC groups) THEN
        PERFORM expiryctl.replay_refuse('role', format(
            '%s needs membership of %s, and the login %s has none: ask the schema owner to run `expiryctl access grant %s %s`',
            action, array_to_string(groups, ' or '), session_user, session_user, groups[1]));
    END IF;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.require_role(action text, VARIADIC groups text[]) FROM PUBLIC;
