-- audit_next_seq is audit_log.seq's default: one more than the last row's,
-- so that the chain has no gap. It takes the append lock first, as
-- audit_next_at says why.
CREATE OR REPLACE FUNCTION expiryctl.audit_next_seq() RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s' AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT coalesce(max(seq), 0) + 1 FROM expiryctl.audit_log;
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_next_seq() FROM PUBLIC;
