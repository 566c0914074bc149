-- +goose Up
-- Beyond RabbitMQ (issue 33): a letter says which queue system it was
-- captured from, and keeps that system's own attributes of the message
-- (SQS: MessageId, ApproximateReceiveCount, SentTimestamp,
-- DeadLetterQueueSourceArn, MessageGroupId, …) beside its headers, which
-- for SQS hold the typed message attributes. Every letter archived so far
-- came from RabbitMQ. Like the rest of the letter, neither changes after
-- capture (dead_letters_refuse_change).
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.dead_letters
    ADD COLUMN source_system text NOT NULL DEFAULT 'rabbitmq'
        CONSTRAINT dead_letters_source_system_check CHECK (source_system IN ('rabbitmq', 'sqs')),
    ADD COLUMN native jsonb;
ALTER TABLE expiryctl.dead_letters ALTER COLUMN native SET COMPRESSION lz4;
COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: rabbitmq or sqs.';
COMMENT ON COLUMN expiryctl.dead_letters.native IS 'The source system''s own attributes of the message, by their names there (SQS system attributes); NULL for RabbitMQ, whose are in properties.';

-- Both join the columns that never change.
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

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
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
          OR NEW.attempts IS DISTINCT FROM OLD.attempts)
    EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();
ALTER TABLE expiryctl.dead_letters DROP COLUMN native, DROP COLUMN source_system;
