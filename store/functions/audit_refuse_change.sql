-- audit_refuse_change is the trigger that keeps the append-only tables so
-- for every writer, the owner included: an UPDATE or TRUNCATE of
-- audit_log, audit_tree or audit_checkpoints, a DELETE of audit_log, and a
-- TRUNCATE of the letters, their states, and the replay items and outcomes
-- are refused.
CREATE OR REPLACE FUNCTION expiryctl.audit_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows can be added, never changed or removed';
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_refuse_change() FROM PUBLIC;
