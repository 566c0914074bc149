-- caller_in says whether the session's login is in any of groups, or is
-- the owner (see caller_is_owner). It reads session_user, never
-- current_user: inside a SECURITY DEFINER function current_user is the
-- owner, and SET ROLE cannot make a login someone else.
-- It is PL/pgSQL, not SQL, because every governed call asks it once: a
-- SQL function with a SET clause is never inlined, and each call of it in
-- a new transaction parsed and planned its query again (about 100 µs, four
-- times the check itself), where PL/pgSQL keeps the plan for the session.
CREATE OR REPLACE FUNCTION expiryctl.caller_in(variadic groups text[]) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN expiryctl.caller_is_owner()
        OR EXISTS (SELECT 1 FROM unnest(groups) g
                   WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g)
                     AND pg_has_role(session_user, g, 'MEMBER'));
END
$$;

REVOKE ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
