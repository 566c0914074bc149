-- audit_next_at, audit_next_seq and audit_next_prev_hash are audit_log's
-- column defaults: together they chain a new row to the one before it.
-- Each default takes the append lock (an arbitrary constant used for nothing
-- else), held until commit, before it reads the tail. They are VOLATILE SQL
-- functions: each of their statements takes a fresh snapshot, so the read
-- after the lock sees the row the previous holder committed, and, in a
-- multi-row insert, the rows this statement inserted before. Each takes the
-- lock itself (it is re-entrant), so the order in which PostgreSQL evaluates
-- the defaults does not matter.
CREATE OR REPLACE FUNCTION expiryctl.audit_next_at() RETURNS timestamptz
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_xact_lock(435459991924);
    SELECT clock_timestamp();
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_next_at() FROM PUBLIC;
