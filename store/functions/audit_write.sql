-- audit_write is the functions' own: the row of a state change, written in
-- the change's transaction. The details name the build of the client that
-- made the change (audit_build), in place of any "build" the caller put.
CREATE OR REPLACE FUNCTION expiryctl.audit_write(actor text, action text, target text, details jsonb, outcome text DEFAULT 'ok')
RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    VALUES (actor, action, coalesce(target, ''), (coalesce(details, '{}') - 'build') || expiryctl.audit_build(), outcome)
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_write(actor text, action text, target text, details jsonb, outcome text) FROM PUBLIC;
