-- caller_is_owner says whether the session's login is the schema's owner
-- or a superuser. Who may do what is membership of expiryctl's groups, and
-- the functions check it; the owner (or a superuser) passes every check:
-- governance is advisory for them, and the audit trail records their
-- login.
CREATE OR REPLACE FUNCTION expiryctl.caller_is_owner() RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- PL/pgSQL for the plan kept across calls, as caller_in.
    RETURN (SELECT pg_has_role(session_user, n.nspowner, 'MEMBER')
              FROM pg_namespace n WHERE n.nspname = 'expiryctl');
END
$$;

REVOKE ALL ON FUNCTION expiryctl.caller_is_owner() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
