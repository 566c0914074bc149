-- +goose Up
-- River, BullMQ and a team's own jobs table (issue 34): a letter may be a
-- job that a job store keeps failed in place. Its queue names the store
-- without credentials, river://HOST:PORT/DATABASE/QUEUE,
-- bullmq://HOST:PORT/DB/PREFIX/QUEUE or
-- jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE,
-- and the archive keeps each system's letters named as its own, whoever
-- inserts, so that a summary reads a queue's system from its name. NOT
-- VALID: the older constraints held every row archived so far to
-- rabbitmq and sqs, each named as it is named.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_source_system_check,
    ADD CONSTRAINT dead_letters_source_system_check
        CHECK (source_system IN ('rabbitmq', 'sqs', 'river', 'bullmq', 'jobtable')) NOT VALID;
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_system_names_queue,
    ADD CONSTRAINT dead_letters_system_names_queue
        CHECK ((source_system = 'sqs') = (source_queue LIKE 'arn:aws:sqs:%')
           AND (source_system = 'river') = (source_queue LIKE 'river://%')
           AND (source_system = 'bullmq') = (source_queue LIKE 'bullmq://%')
           AND (source_system = 'jobtable') = (source_queue LIKE 'jobtable://%')) NOT VALID;
COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: rabbitmq, sqs, river, bullmq or jobtable.';

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_system_names_queue,
    ADD CONSTRAINT dead_letters_system_names_queue
        CHECK ((source_system = 'sqs') = (source_queue LIKE 'arn:aws:sqs:%')) NOT VALID;
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_source_system_check,
    ADD CONSTRAINT dead_letters_source_system_check CHECK (source_system IN ('rabbitmq', 'sqs')) NOT VALID;
COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: rabbitmq or sqs.';
