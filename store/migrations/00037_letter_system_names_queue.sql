-- +goose Up
-- A letter's system and the queue it was captured from agree: an SQS
-- letter's queue is the DLQ's ARN (arn:aws:sqs:REGION:ACCOUNT:NAME), and
-- no RabbitMQ letter's queue looks like one. The archive's summary reads
-- each queue's system from its name, without reading the letters, so it
-- costs what it cost with one system; the database keeps the two from
-- disagreeing, whoever inserts. NOT VALID: every letter archived before
-- 00035 is RabbitMQ's and named as RabbitMQ names queues.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.dead_letters ADD CONSTRAINT dead_letters_system_names_queue
    CHECK ((source_system = 'sqs') = (source_queue LIKE 'arn:aws:sqs:%')) NOT VALID;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_system_names_queue;
