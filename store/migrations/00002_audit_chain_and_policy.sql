-- The audit trail becomes append-only and hash-chained; policy moves into
-- the database so that no local file can loosen it.

-- +goose Up

-- Rows written before the chain existed are chained here, in id order.
ALTER TABLE expiryctl.audit_log
    ADD COLUMN seq       bigint,
    ADD COLUMN prev_hash bytea,
    ADD COLUMN hash      bytea;

-- The head of the chain: the last sequence number and hash. The insert
-- trigger reads and advances it while holding the append lock, so that
-- concurrent writers form one unbroken chain.
CREATE TABLE expiryctl.audit_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint  NOT NULL,
    hash      bytea   NOT NULL
);

-- +goose StatementBegin
-- audit_canonical is the byte string a row's hash covers; docs/audit.md
-- specifies it for independent verifiers. Every field is length-prefixed
-- (4-byte big-endian byte count, then UTF-8), numbers are 8-byte big-endian,
-- and the time is microseconds since the Unix epoch, so no session setting
-- (TimeZone, DateStyle, extra_float_digits) can change it.
CREATE FUNCTION expiryctl.audit_canonical(
    seq bigint, at timestamptz, actor text, db_role text, action text,
    target text, details jsonb, outcome text, prev_hash bytea
) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT int8send(seq)
        || int8send((extract(epoch FROM at) * 1000000)::bigint)
        || int4send(octet_length(convert_to(actor, 'UTF8')))   || convert_to(actor, 'UTF8')
        || int4send(octet_length(convert_to(db_role, 'UTF8'))) || convert_to(db_role, 'UTF8')
        || int4send(octet_length(convert_to(action, 'UTF8')))  || convert_to(action, 'UTF8')
        || int4send(octet_length(convert_to(target, 'UTF8')))  || convert_to(target, 'UTF8')
        || int4send(octet_length(convert_to(details::text, 'UTF8'))) || convert_to(details::text, 'UTF8')
        || int4send(octet_length(convert_to(outcome, 'UTF8'))) || convert_to(outcome, 'UTF8')
        || prev_hash
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- SECURITY DEFINER: the trigger, not the writer, owns audit_head. A role
-- that may only INSERT into audit_log (say, one role per person under
-- identity_mode db-role) can then append without any right on audit_head,
-- and so cannot move the head that `audit verify` checks the chain's end
-- against. session_user, which the row records, is unaffected by it.
CREATE FUNCTION expiryctl.audit_chain() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    prev_seq bigint;
    prev bytea;
BEGIN
    -- One appender at a time, until commit: the next row's prev_hash must be
    -- this row's hash. The lock id is an arbitrary constant used for nothing
    -- else.
    PERFORM pg_advisory_xact_lock(435459991924);
    SELECT seq, hash INTO prev_seq, prev FROM expiryctl.audit_head WHERE singleton;
    -- The database, not the client, says who and when.
    NEW.seq := prev_seq + 1;
    NEW.at := date_trunc('microseconds', clock_timestamp());
    NEW.db_role := session_user;
    NEW.prev_hash := prev;
    -- expiryctl.audit_canonical, written out: every command runs in a new
    -- session, and a nested function call costs planning in each.
    NEW.hash := sha256(int8send(NEW.seq)
        || int8send((extract(epoch FROM NEW.at) * 1000000)::bigint)
        || int4send(octet_length(convert_to(NEW.actor, 'UTF8')))   || convert_to(NEW.actor, 'UTF8')
        || int4send(octet_length(convert_to(NEW.db_role, 'UTF8'))) || convert_to(NEW.db_role, 'UTF8')
        || int4send(octet_length(convert_to(NEW.action, 'UTF8')))  || convert_to(NEW.action, 'UTF8')
        || int4send(octet_length(convert_to(NEW.target, 'UTF8')))  || convert_to(NEW.target, 'UTF8')
        || int4send(octet_length(convert_to(NEW.details::text, 'UTF8'))) || convert_to(NEW.details::text, 'UTF8')
        || int4send(octet_length(convert_to(NEW.outcome, 'UTF8'))) || convert_to(NEW.outcome, 'UTF8')
        || prev);
    UPDATE expiryctl.audit_head SET seq = NEW.seq, hash = NEW.hash WHERE singleton;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows can be added, never changed or removed';
END
$$;
-- +goose StatementEnd

-- Chain the rows that exist, in the order they were written.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
    prev bytea := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    n bigint := 0;
    h bytea;
BEGIN
    FOR r IN SELECT * FROM expiryctl.audit_log ORDER BY id LOOP
        n := n + 1;
        h := sha256(expiryctl.audit_canonical(n, date_trunc('microseconds', r.at), r.actor, r.db_role, r.action,
                                              r.target, r.details, r.outcome, prev));
        UPDATE expiryctl.audit_log SET seq = n, at = date_trunc('microseconds', r.at), prev_hash = prev, hash = h
         WHERE id = r.id;
        prev := h;
    END LOOP;
    -- The head always exists (seq 0 and the zero hash for an empty trail),
    -- so that the insert trigger only ever updates it.
    INSERT INTO expiryctl.audit_head VALUES (true, n, prev);
END
$$;
-- +goose StatementEnd

ALTER TABLE expiryctl.audit_log
    ALTER COLUMN seq SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL,
    ALTER COLUMN hash SET NOT NULL,
    ADD CONSTRAINT audit_log_seq_unique UNIQUE (seq);

CREATE TRIGGER audit_log_chain BEFORE INSERT ON expiryctl.audit_log
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_chain();
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON expiryctl.audit_log
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON expiryctl.audit_log
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON expiryctl.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();
-- ENABLE ALWAYS: the chain and the refusals also hold for a session that
-- sets session_replication_role = replica (as logical replication does).
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_chain;
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_update;
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_delete;
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_truncate;

REVOKE UPDATE, DELETE, TRUNCATE ON expiryctl.audit_log FROM PUBLIC;
-- Only the chain trigger (running as the owner) touches the head.
REVOKE ALL ON expiryctl.audit_head FROM PUBLIC;

CREATE INDEX audit_log_actor ON expiryctl.audit_log (actor, seq DESC);
CREATE INDEX audit_log_action ON expiryctl.audit_log (action, seq DESC);
CREATE INDEX audit_log_target ON expiryctl.audit_log (target, seq DESC);

-- Policy: one row. Requesters cannot loosen it with a local file; changes go
-- through `expiryctl policy set`, which audits them.
CREATE TABLE expiryctl.policy (
    singleton             boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    approvers             text[]      NOT NULL DEFAULT '{}',
    max_cohort            integer     NOT NULL DEFAULT 500 CHECK (max_cohort > 0),
    max_rate              numeric     NOT NULL DEFAULT 50 CHECK (max_rate > 0),
    approval_ttl          interval    NOT NULL DEFAULT '1 hour' CHECK (approval_ttl > interval '0'),
    stop_failure_ratio    numeric     NOT NULL DEFAULT 0.05 CHECK (stop_failure_ratio >= 0 AND stop_failure_ratio <= 1),
    stop_queue_depth      integer     NOT NULL DEFAULT 10000 CHECK (stop_queue_depth > 0),
    stop_redead_ratio     numeric     NOT NULL DEFAULT 0.2 CHECK (stop_redead_ratio >= 0 AND stop_redead_ratio <= 1),
    canary_window         interval    NOT NULL DEFAULT '30 seconds' CHECK (canary_window >= interval '0'),
    identity_mode         text        NOT NULL DEFAULT 'declared' CHECK (identity_mode IN ('declared', 'db-role')),
    eligibility_query     text        NOT NULL DEFAULT '',
    retention             interval    NOT NULL DEFAULT '90 days' CHECK (retention > interval '0'),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    updated_by            text        NOT NULL DEFAULT 'migration'
);
INSERT INTO expiryctl.policy DEFAULT VALUES;

-- +goose Down
DROP TABLE expiryctl.policy;
DROP TRIGGER audit_log_chain ON expiryctl.audit_log;
DROP TRIGGER audit_log_no_update ON expiryctl.audit_log;
DROP TRIGGER audit_log_no_delete ON expiryctl.audit_log;
DROP TRIGGER audit_log_no_truncate ON expiryctl.audit_log;
DROP FUNCTION expiryctl.audit_chain();
DROP FUNCTION expiryctl.audit_refuse_change();
DROP FUNCTION expiryctl.audit_canonical(bigint, timestamptz, text, text, text, text, jsonb, text, bytea);
DROP TABLE expiryctl.audit_head;
ALTER TABLE expiryctl.audit_log DROP COLUMN seq, DROP COLUMN prev_hash, DROP COLUMN hash;
