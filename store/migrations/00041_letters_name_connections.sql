-- +goose Up
-- A letter names the connection it was captured from, never a server to
-- dial (issue 54). Every command that connects resolves that name through
-- the operator's own configuration, so that a letter an ingester forged
-- with raw SQL cannot make an approver's `replay show` or a run log in to
-- a server of the ingester's choosing with the approver's password.
--
-- connection is the name; for a job store's letter it is also the part of
-- the queue's name between "://" and the next "/": river://CONNECTION/QUEUE,
-- bullmq://CONNECTION/PREFIX/QUEUE, jobtable://CONNECTION/SCHEMA.TABLE,
-- which the constraint dead_letters_connection_named holds for every
-- letter stored from now on (NOT VALID: a letter of a form no release
-- wrote stays as it is).
--
-- Letters captured before named their job store's server instead:
-- river://HOST:PORT/DATABASE/QUEUE, bullmq://HOST:PORT/DB/PREFIX/QUEUE,
-- jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE. Each such server is given
-- the name config.DeriveName gives a server typed on the command line,
-- SYSTEM-HOST:PORT-DATABASE with each run of characters a name cannot
-- hold made one '-' and, where anything was made so, '-' and the first
-- eight hex digits of the SHA-256 of the uncleaned text (for instance
-- river-127.0.0.1-5432-reservations-f021f4f2), so that a replay of them
-- needs a connection of that name in the operator's configuration
-- (docs/configuration.md, "Letters captured before connections had
-- names"). Their queue names are rewritten to the new form, and their
-- fingerprints, which hash the queue's name, with them, so that the same
-- failed job captured again through that connection is the same letter.
-- RabbitMQ's letters name the connection rabbitmq and SQS's sqs: the
-- names the flags and the environment stand in for; rabbitmq stays the
-- column's default, which a job store's letter cannot take.
--
-- A request made before keeps the targets it was approved with; a run of
-- a job store's request finds its frozen targets named by a server and is
-- refused: it is to be requested again. The policy's job_tables keep the
-- keys two admins approved: a mapping kept under a server's name is found
-- for the connection its server's name derives to.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.dead_letters ADD COLUMN connection text NOT NULL DEFAULT 'rabbitmq';
COMMENT ON COLUMN expiryctl.dead_letters.connection IS 'The name of the connection the letter was captured from, which the operator''s configuration resolves; never a server.';

-- The rewrite changes what never changes after capture: the triggers
-- that refuse it, and those that count it, step aside for this
-- transaction (the tallies are renamed with the letters instead), and the
-- letters' trigger comes back with the new column among the frozen ones.
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
ALTER TABLE expiryctl.dead_letter_states DISABLE TRIGGER USER;

UPDATE expiryctl.dead_letters SET connection = 'sqs' WHERE source_system = 'sqs';

-- Each legacy queue's letters, their states and their tallies take the
-- new name. A job store's fingerprint (deadletter's fingerprint, for a
-- system that retries in place) is the SHA-256 of five length-prefixed
-- fields: the version, the system, the queue's name, the job's id and its
-- incarnation.
-- +goose StatementBegin
DO $$
DECLARE
    q record;
    base text;
    clean text;
    conn text;
    renamed text;
BEGIN
    FOR q IN SELECT DISTINCT d.source_system AS sys, d.source_queue AS old, m[1] AS authority, m[2] AS db, m[3] AS rest
               FROM expiryctl.dead_letters d
              CROSS JOIN LATERAL regexp_match(d.source_queue, '^[a-z]+://([^/@]+:[0-9]+)/([^/]+)/(.+)$') AS m
              WHERE d.source_system IN ('river', 'bullmq', 'jobtable') AND m IS NOT NULL
              ORDER BY 1, 2 LOOP
        base := q.sys || '-' || q.authority || '-' || q.db;
        clean := regexp_replace(base, '[^A-Za-z0-9._-]+', '-', 'g');
        conn := CASE WHEN clean = base AND length(clean) <= 63 THEN clean
                     ELSE left(clean, 54) || '-' || left(encode(sha256(convert_to(base, 'UTF8')), 'hex'), 8) END;
        renamed := q.sys || '://' || conn || '/' || q.rest;
        UPDATE expiryctl.dead_letters d
           SET connection = conn, source_queue = renamed,
               fingerprint = sha256(int8send(octet_length('expiryctl dead-letter fingerprint v1')) || convert_to('expiryctl dead-letter fingerprint v1', 'UTF8')
                                 || int8send(octet_length(convert_to(q.sys, 'UTF8'))) || convert_to(q.sys, 'UTF8')
                                 || int8send(octet_length(convert_to(renamed, 'UTF8'))) || convert_to(renamed, 'UTF8')
                                 || int8send(octet_length(convert_to(coalesce(d.native->>'job_id', ''), 'UTF8')))
                                 || convert_to(coalesce(d.native->>'job_id', ''), 'UTF8')
                                 || int8send(octet_length(convert_to(coalesce(d.native->>'incarnation', ''), 'UTF8')))
                                 || convert_to(coalesce(d.native->>'incarnation', ''), 'UTF8'))
         WHERE d.source_system = q.sys AND d.source_queue = q.old;
        UPDATE expiryctl.dead_letter_states SET source_queue = renamed WHERE source_queue = q.old;
        UPDATE expiryctl.dead_letter_tallies SET source_queue = renamed WHERE source_queue = q.old;
    END LOOP;
END
$$;
-- +goose StatementEnd

ALTER TABLE expiryctl.dead_letter_states ENABLE TRIGGER USER;
ALTER TABLE expiryctl.dead_letters ADD CONSTRAINT dead_letters_connection_named
    CHECK (connection ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
           AND (source_system NOT IN ('river', 'bullmq', 'jobtable')
                OR source_queue LIKE source_system || '://' || connection || '/%')) NOT VALID;

CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters
    FOR EACH ROW
    WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.headers IS DISTINCT FROM OLD.headers
          OR NEW.properties IS DISTINCT FROM OLD.properties
          OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256 OR NEW.fingerprint IS DISTINCT FROM OLD.fingerprint
          OR NEW.job_key IS DISTINCT FROM OLD.job_key OR NEW.message_id IS DISTINCT FROM OLD.message_id
          OR NEW.reservation_id IS DISTINCT FROM OLD.reservation_id
          OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
          OR NEW.expected_version IS DISTINCT FROM OLD.expected_version OR NEW.due_at IS DISTINCT FROM OLD.due_at
          OR NEW.source_queue IS DISTINCT FROM OLD.source_queue OR NEW.origin_queue IS DISTINCT FROM OLD.origin_queue
          OR NEW.original_exchange IS DISTINCT FROM OLD.original_exchange
          OR NEW.original_routing_key IS DISTINCT FROM OLD.original_routing_key
          OR NEW.content_type IS DISTINCT FROM OLD.content_type OR NEW.payload_size IS DISTINCT FROM OLD.payload_size
          OR NEW.dead_lettered_at IS DISTINCT FROM OLD.dead_lettered_at OR NEW.ingested_at IS DISTINCT FROM OLD.ingested_at
          OR NEW.reason_category IS DISTINCT FROM OLD.reason_category OR NEW.error_class IS DISTINCT FROM OLD.error_class
          OR NEW.last_error IS DISTINCT FROM OLD.last_error OR NEW.attempt_history IS DISTINCT FROM OLD.attempt_history
          OR NEW.previous_id IS DISTINCT FROM OLD.previous_id OR NEW.replay_request_id IS DISTINCT FROM OLD.replay_request_id
          OR NEW.replay_count IS DISTINCT FROM OLD.replay_count
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at
          OR NEW.attempts IS DISTINCT FROM OLD.attempts
          OR NEW.source_system IS DISTINCT FROM OLD.source_system OR NEW.native IS DISTINCT FROM OLD.native
          OR NEW.connection IS DISTINCT FROM OLD.connection)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();

GRANT SELECT (connection) ON expiryctl.dead_letters TO expiryctl_auditor;

-- +goose Down
-- The letters keep their connections' names in their queue names: a
-- server's name cannot be told from a connection's name without the
-- configuration that gave it.
SET LOCAL search_path TO pg_catalog, pg_temp;
REVOKE SELECT (connection) ON expiryctl.dead_letters FROM expiryctl_auditor;
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters
    FOR EACH ROW
    WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.headers IS DISTINCT FROM OLD.headers
          OR NEW.properties IS DISTINCT FROM OLD.properties
          OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256 OR NEW.fingerprint IS DISTINCT FROM OLD.fingerprint
          OR NEW.job_key IS DISTINCT FROM OLD.job_key OR NEW.message_id IS DISTINCT FROM OLD.message_id
          OR NEW.reservation_id IS DISTINCT FROM OLD.reservation_id
          OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
          OR NEW.expected_version IS DISTINCT FROM OLD.expected_version OR NEW.due_at IS DISTINCT FROM OLD.due_at
          OR NEW.source_queue IS DISTINCT FROM OLD.source_queue OR NEW.origin_queue IS DISTINCT FROM OLD.origin_queue
          OR NEW.original_exchange IS DISTINCT FROM OLD.original_exchange
          OR NEW.original_routing_key IS DISTINCT FROM OLD.original_routing_key
          OR NEW.content_type IS DISTINCT FROM OLD.content_type OR NEW.payload_size IS DISTINCT FROM OLD.payload_size
          OR NEW.dead_lettered_at IS DISTINCT FROM OLD.dead_lettered_at OR NEW.ingested_at IS DISTINCT FROM OLD.ingested_at
          OR NEW.reason_category IS DISTINCT FROM OLD.reason_category OR NEW.error_class IS DISTINCT FROM OLD.error_class
          OR NEW.last_error IS DISTINCT FROM OLD.last_error OR NEW.attempt_history IS DISTINCT FROM OLD.attempt_history
          OR NEW.previous_id IS DISTINCT FROM OLD.previous_id OR NEW.replay_request_id IS DISTINCT FROM OLD.replay_request_id
          OR NEW.replay_count IS DISTINCT FROM OLD.replay_count
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at
          OR NEW.attempts IS DISTINCT FROM OLD.attempts
          OR NEW.source_system IS DISTINCT FROM OLD.source_system OR NEW.native IS DISTINCT FROM OLD.native)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_connection_named, DROP COLUMN connection;
