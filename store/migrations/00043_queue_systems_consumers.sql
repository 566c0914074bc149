-- +goose Up
-- Whether a system shows who consumes its queues is a row's word, like the
-- rest of what differs between systems (00042). The handler check reads the
-- consumers of a replay's targets before it starts; of a system that shows
-- none (SQS, and a job store whose workers take jobs from a table without
-- registering) it has nothing to read, so a run of a request that did not
-- vouch for the handler (--same-handler-ok) was refused only after its
-- approval (handler-unverified). replay_request_create reads this column
-- and refuses such a request when it is made (rule handler-unseen), with
-- the system's own sentence of why.
--
-- consumers_unseen is NULL for a system that shows its consumers; for one
-- that does not, its driver's sentence of why (driver.Words.ConsumersUnseen),
-- which a refusal prints: printable, at most 300 characters. The migrate
-- writes it from the drivers (queue_systems_register) and may change it for
-- a system with letters: it is words, not how letters are named. The three
-- systems seeded in 00042 that show no consumers get their drivers' words
-- here, so that a migrate that registers no system leaves the rule in force.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.queue_systems ADD COLUMN consumers_unseen text
    CONSTRAINT queue_systems_consumers_unseen_check
        CHECK (consumers_unseen ~ '\S' AND char_length(consumers_unseen) <= 300 AND consumers_unseen !~ '[\x01-\x1f\x7f-\x9f]');
COMMENT ON COLUMN expiryctl.queue_systems.consumers_unseen IS 'Why the system shows nobody consuming a queue, so that a replay''s handler check has nothing to read and its request must vouch for the handler (rule handler-unseen); NULL when it shows its consumers.';

UPDATE expiryctl.queue_systems SET consumers_unseen = w.why
  FROM (VALUES
    ('sqs', 'SQS shows no consumers of a queue, nor their versions'),
    ('river', 'River shows no workers of a queue, nor their versions: its clients take jobs from the table without registering as consumers'),
    ('jobtable', 'a jobs table shows no workers, nor their versions: its poller takes rows without registering as a consumer')) AS w(name, why)
 WHERE queue_systems.name = w.name;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.queue_systems DROP COLUMN consumers_unseen;
