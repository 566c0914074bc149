-- The chain moves out of the PL/pgSQL insert trigger. Every command runs in
-- a new database session, and the first PL/pgSQL call in a session loads and
-- compiles the language: that alone made the audit row cost a read command
-- about a fifth of its time. Now the row's place in the chain comes from
-- column defaults (plain SQL functions, under the same advisory lock) and its
-- hash is a generated column, so no client can write one at all. The
-- surrogate id goes too: seq identifies a row, and every index is paid for
-- by every command.

-- +goose Up

-- The hash is re-derived from the fields below. Refuse to migrate a trail
-- whose stored hashes do not match its fields: re-deriving would hide the
-- change. The generated hash reads text as the database stores it, which is
-- the canonical UTF-8 only in a UTF-8 database.
-- +goose StatementBegin
DO $$
DECLARE
    bad bigint;
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'expiryctl needs a UTF8 database, not %', current_setting('server_encoding')
            USING HINT = 'create the database with ENCODING ''UTF8''';
    END IF;
    SELECT min(seq) INTO bad FROM expiryctl.audit_log
     WHERE hash IS DISTINCT FROM sha256(expiryctl.audit_canonical(seq, at, actor, db_role, action, target, details, outcome, prev_hash));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'expiryctl.audit_log: the stored hash of seq % does not match its fields', bad
            USING HINT = 'run `expiryctl audit verify`, and export the trail, before migrating';
    END IF;
END
$$;
-- +goose StatementEnd

DROP TRIGGER audit_log_chain ON expiryctl.audit_log;
DROP FUNCTION expiryctl.audit_chain();
DROP TABLE expiryctl.audit_head;

-- Each default takes the append lock (an arbitrary constant used for nothing
-- else), held until commit, before it reads the tail. They are VOLATILE SQL
-- functions: each of their statements takes a fresh snapshot, so the read
-- after the lock sees the row the previous holder committed, and, in a
-- multi-row insert, the rows this statement inserted before. Each takes the
-- lock itself (it is re-entrant), so the order in which PostgreSQL evaluates
-- the defaults does not matter.
-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_next_at() RETURNS timestamptz
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_xact_lock(435459991924);
    SELECT clock_timestamp();
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_next_seq() RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_xact_lock(435459991924);
    SELECT coalesce(max(seq), 0) + 1 FROM expiryctl.audit_log;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_next_prev_hash() RETURNS bytea
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_xact_lock(435459991924);
    SELECT coalesce((SELECT hash FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1),
                    '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
$$;
-- +goose StatementEnd

-- The hash is expiryctl.audit_canonical written out with immutable parts,
-- giving the same bytes: a generated column may use only immutable
-- functions, and a call to the SQL function would be compiled again in every
-- session. decode(..., 'escape') of a text with its backslashes doubled
-- gives the text's bytes, and the epoch is taken from an interval, which
-- needs no time zone.
ALTER TABLE expiryctl.audit_log
    ALTER COLUMN at SET DEFAULT expiryctl.audit_next_at(),
    ALTER COLUMN seq SET DEFAULT expiryctl.audit_next_seq(),
    ALTER COLUMN prev_hash SET DEFAULT expiryctl.audit_next_prev_hash(),
    DROP COLUMN id,
    DROP CONSTRAINT audit_log_seq_unique,
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq),
    DROP COLUMN hash,
    ADD COLUMN hash bytea NOT NULL GENERATED ALWAYS AS (sha256(
           int8send(seq)
        || int8send((extract(epoch FROM at - '1970-01-01 00:00:00+00'::timestamptz) * 1000000)::bigint)
        || int4send(octet_length(actor))         || decode(replace(actor, '\', '\\'), 'escape')
        || int4send(octet_length(db_role))       || decode(replace(db_role, '\', '\\'), 'escape')
        || int4send(octet_length(action))        || decode(replace(action, '\', '\\'), 'escape')
        || int4send(octet_length(target))        || decode(replace(target, '\', '\\'), 'escape')
        || int4send(octet_length(details::text)) || decode(replace(details::text, '\', '\\'), 'escape')
        || int4send(octet_length(outcome))       || decode(replace(outcome, '\', '\\'), 'escape')
        || prev_hash)) STORED;
CREATE INDEX audit_log_at ON expiryctl.audit_log (at);

-- After the move every row must still hash as audit_canonical, the
-- encoding docs/audit.md specifies, says.
-- +goose StatementBegin
DO $$
DECLARE
    bad bigint;
BEGIN
    SELECT min(seq) INTO bad FROM expiryctl.audit_log
     WHERE hash <> sha256(expiryctl.audit_canonical(seq, at, actor, db_role, action, target, details, outcome, prev_hash));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'expiryctl.audit_log: seq % hashes differently after the migration', bad;
    END IF;
END
$$;
-- +goose StatementEnd

-- The database, not the client, says who and when. The condition is plain
-- SQL, so the refusing function (PL/pgSQL) is only loaded for a row that
-- names another role or a time outside its own statement.
-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_refuse_forged() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.audit_log: db_role and at are set by the database; leave them out of the INSERT'
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('db_role %L (session_user is %L), at %s', NEW.db_role, session_user, NEW.at);
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_log_who_and_when BEFORE INSERT ON expiryctl.audit_log
    -- The second of slack keeps a clock stepped back mid-statement from
    -- refusing an honest row.
    FOR EACH ROW WHEN (NEW.db_role IS DISTINCT FROM session_user
                       OR NEW.at < statement_timestamp() - interval '1 second'
                       OR NEW.at > clock_timestamp() + interval '1 second')
    EXECUTE FUNCTION expiryctl.audit_refuse_forged();
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_who_and_when;

-- A writer names only what it did; the database numbers, links and hashes
-- the row. Grant writers INSERT on these columns only (docs/governance.md).
REVOKE INSERT ON expiryctl.audit_log FROM PUBLIC;

-- +goose Down
DROP TRIGGER audit_log_who_and_when ON expiryctl.audit_log;
DROP FUNCTION expiryctl.audit_refuse_forged();
DROP INDEX expiryctl.audit_log_at;
ALTER TABLE expiryctl.audit_log
    ALTER COLUMN hash DROP EXPRESSION,
    DROP CONSTRAINT audit_log_pkey,
    ADD CONSTRAINT audit_log_seq_unique UNIQUE (seq),
    ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ALTER COLUMN at SET DEFAULT clock_timestamp(),
    ALTER COLUMN seq DROP DEFAULT,
    ALTER COLUMN prev_hash DROP DEFAULT;
CREATE INDEX audit_log_at ON expiryctl.audit_log (at DESC, id DESC);
DROP FUNCTION expiryctl.audit_next_at();
DROP FUNCTION expiryctl.audit_next_seq();
DROP FUNCTION expiryctl.audit_next_prev_hash();

CREATE TABLE expiryctl.audit_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint  NOT NULL,
    hash      bytea   NOT NULL
);
INSERT INTO expiryctl.audit_head
SELECT true, coalesce(max(seq), 0),
       coalesce((SELECT hash FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1),
                '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea)
  FROM expiryctl.audit_log;
REVOKE ALL ON expiryctl.audit_head FROM PUBLIC;

-- +goose StatementBegin
CREATE FUNCTION expiryctl.audit_chain() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    prev_seq bigint;
    prev bytea;
BEGIN
    PERFORM pg_advisory_xact_lock(435459991924);
    SELECT seq, hash INTO prev_seq, prev FROM expiryctl.audit_head WHERE singleton;
    NEW.seq := prev_seq + 1;
    NEW.at := date_trunc('microseconds', clock_timestamp());
    NEW.db_role := session_user;
    NEW.prev_hash := prev;
    NEW.hash := sha256(expiryctl.audit_canonical(NEW.seq, NEW.at, NEW.actor, NEW.db_role, NEW.action,
                                                 NEW.target, NEW.details, NEW.outcome, prev));
    UPDATE expiryctl.audit_head SET seq = NEW.seq, hash = NEW.hash WHERE singleton;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_chain BEFORE INSERT ON expiryctl.audit_log
    FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_chain();
ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_chain;
