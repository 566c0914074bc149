-- audit_next_at, audit_next_seq and audit_next_prev_hash are audit_log's
-- column defaults: together they chain a new row to the one before it.
-- Each default takes the append lock, held until commit, before it reads
-- the tail: the table audit_chain in EXCLUSIVE mode, which only a login with
-- UPDATE, DELETE or TRUNCATE on it can take, and no group has (an advisory
-- key, which it was until migration 00022, is any login's to hold). The
-- wait is bounded (lock_timeout): a session that holds the lock holds it
-- in a function's transaction, and one that waits longer than that is told
-- who holds it (audit.Record) instead of waiting without end. They are VOLATILE SQL
-- functions: each of their statements takes a fresh snapshot, so the read
-- after the lock sees the row the previous holder committed, and, in a
-- multi-row insert, the rows this statement inserted before. Each takes the
-- lock itself (it is re-entrant), so the order in which PostgreSQL evaluates
-- the defaults does not matter.
CREATE OR REPLACE FUNCTION expiryctl.audit_next_at() RETURNS timestamptz
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s' AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT clock_timestamp();
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_next_at() FROM PUBLIC;
