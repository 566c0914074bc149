-- audit_next_prev_hash is audit_log.prev_hash's default: the hash of the
-- row before, or 32 zero bytes for the first. It takes the append lock
-- first, as audit_next_at says why.
CREATE OR REPLACE FUNCTION expiryctl.audit_next_prev_hash() RETURNS bytea
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s' AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT coalesce((SELECT hash FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1),
                    '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_next_prev_hash() FROM PUBLIC;
