-- +goose Up
-- A letter keeps every AMQP basic property it was received with, so that a
-- replay sends the message that died: correlation id, reply-to, type, app
-- id, priority, user id, content encoding, the original timestamp. Headers
-- already keep their values; their narrow wire types (byte, short, int and
-- the unsigned forms, float) now travel as tags in the same jsonb column,
-- which needs no schema change.
--
-- properties is NULL for letters captured before this migration: nothing
-- says what they carried beyond content type and message id, and `replay
-- show` says so.
ALTER TABLE expiryctl.dead_letters ADD COLUMN properties jsonb;
COMMENT ON COLUMN expiryctl.dead_letters.properties IS
    'AMQP basic properties as received (deadletter.EncodeProperties); NULL when not recorded';

-- The properties are part of what never changes after capture, redaction
-- included (they name the job, like message_id, and hold no payload).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.properties IS NOT DISTINCT FROM OLD.properties
       AND NEW.dead_lettered_at = OLD.dead_lettered_at THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload, properties and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

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
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();

-- +goose StatementBegin
-- ingest_letters, as in 00008, with each letter's properties. The version
-- without them stays for binaries of before this migration, whose letters
-- then carry no properties, as before.
CREATE FUNCTION expiryctl.ingest_letters(
    actor text, queue text,
    fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[],
    expected_versions bigint[], due_ats timestamptz[], source_queues text[], origin_queues text[],
    original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[],
    last_errors text[], attempts int[], attempt_histories text[], headers text[], content_types text[],
    payloads bytea[], dead_lettered_ats timestamptz[], replay_request_ids bigint[], replay_counts int[],
    properties text[]
) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    label text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('dlq ingest', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    WITH stored AS (
        INSERT INTO expiryctl.dead_letters (
            fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            payload_sha256, payload_size, dead_lettered_at, replay_request_id, replay_count, previous_id, properties)
        SELECT s.fingerprint, s.job_key, s.message_id, s.reservation_id, s.idempotency_key, s.expected_version, s.due_at,
            s.source_queue, s.origin_queue, s.original_exchange, s.original_routing_key, s.reason_category,
            s.error_class, s.last_error, s.attempts, s.attempt_history::jsonb, s.headers::jsonb, s.content_type, s.payload,
            sha256(s.payload), length(s.payload), s.dead_lettered_at, s.replay_request_id, s.replay_count,
            CASE WHEN s.job_key IS NOT NULL THEN
                (SELECT d.id FROM expiryctl.dead_letters d WHERE d.job_key = s.job_key ORDER BY d.id DESC LIMIT 1)
            END,
            s.properties::jsonb
        FROM unnest(fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys, expected_versions, due_ats,
            source_queues, origin_queues, original_exchanges, original_routing_keys, reason_categories, error_classes,
            last_errors, attempts, attempt_histories, headers, content_types, payloads, dead_lettered_ats,
            replay_request_ids, replay_counts, properties) WITH ORDINALITY
            AS s(fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            dead_lettered_at, replay_request_id, replay_count, properties, ordinal)
        ORDER BY s.ordinal
        ON CONFLICT (fingerprint) DO NOTHING
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM stored;
    PERFORM expiryctl.audit_write(label, 'dlq.ingest.batch', 'queue:' || queue, jsonb_build_object(
        'letters', cardinality(fingerprints), 'stored', cardinality(ids),
        'duplicates', cardinality(fingerprints) - cardinality(ids),
        'first_id', coalesce(ids[1], 0), 'last_id', coalesce(ids[cardinality(ids)], 0)));
    RETURN QUERY SELECT unnest(ids);
END
$$;
-- +goose StatementEnd

-- 00008's ALTER DEFAULT PRIVILEGES IN SCHEMA could not take EXECUTE away
-- from PUBLIC (a schema's defaults only add to the global ones), so each
-- new function is revoked by hand, and the owner's global default is
-- changed for the functions of later migrations.
REVOKE EXECUTE ON FUNCTION expiryctl.ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[],
    timestamptz[], text[], text[], text[], text[], text[], text[], text[], int[], text[], text[], text[], bytea[],
    timestamptz[], bigint[], int[], text[]) FROM PUBLIC;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[],
    timestamptz[], text[], text[], text[], text[], text[], text[], text[], int[], text[], text[], text[], bytea[],
    timestamptz[], bigint[], int[], text[]) TO expiryctl_ingester;

-- +goose Down
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
DROP FUNCTION expiryctl.ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[],
    timestamptz[], text[], text[], text[], text[], text[], text[], text[], int[], text[], text[], text[], bytea[],
    timestamptz[], bigint[], int[], text[]);
DROP TRIGGER dead_letters_immutable ON expiryctl.dead_letters;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.dead_lettered_at = OLD.dead_lettered_at THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters
    FOR EACH ROW
    WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.headers IS DISTINCT FROM OLD.headers
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
          OR NEW.id IS DISTINCT FROM OLD.id OR NEW.redacted_at IS DISTINCT FROM OLD.redacted_at)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
ALTER TABLE expiryctl.dead_letters DROP COLUMN properties;
