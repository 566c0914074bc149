-- +goose Up
-- The queue systems are rows, not names written into the schema (the core
-- names no system: docs/design.md). Each driver says how its system names
-- its queues and how a replay treats its letters, and `expiryctl migrate`
-- registers the drivers it was built with (store.MigrateDeployment, through
-- queue_systems_register), so that a new system is a driver and no edit of
-- SQL. The five systems of the releases before are seeded here as their
-- drivers describe them, so that a migrate that registers none (an older
-- caller, a test template) leaves an archive that takes their letters.
--
-- What the constraints of 00035-00041 wrote out per system now reads this
-- table: the system a letter names is a row of it (a foreign key, in place
-- of dead_letters_source_system_check), and its queue begins with that
-- system's prefix and with no other system's non-empty one, a job store's
-- as PREFIX || CONNECTION || '/…', with the connection a name
-- (dead_letters_system_names_queue and dead_letters_connection_named,
-- which a CHECK cannot hold once they read another table: the statement
-- trigger dead_letters_track_state holds every letter inserted to them, and
-- raises the error under the same constraint names). A letter's system,
-- queue and connection never change after capture (dead_letters_immutable),
-- so checking each letter as it is inserted holds every letter.
--
-- NOT VALID: the checks replaced admitted only the five systems seeded, so
-- every letter archived references a row; the archive is not scanned.
--
-- Only the owner writes the table (no group holds a write privilege, and
-- row security binds pg_write_all_data, as 00024 does for every table);
-- every group reads it: replay_target_of, which the groups call with their
-- own privileges, reads which queues are a job store's, and a command may
-- check that the archive knows its system before it takes a message.
SET LOCAL search_path TO pg_catalog, pg_temp;

CREATE TABLE expiryctl.queue_systems (
    name text PRIMARY KEY CONSTRAINT queue_systems_name_check CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'),
    queue_prefix text NOT NULL CONSTRAINT queue_systems_queue_prefix_check CHECK (queue_prefix ~ '^[!-~]{0,64}$')
        CONSTRAINT queue_systems_queue_prefix_key UNIQUE,
    retries_in_place boolean NOT NULL,
    names_connection_in_queue boolean NOT NULL,
    default_connection text CONSTRAINT queue_systems_default_connection_check
        CHECK (default_connection ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    -- replay_target_of knows a job store's letter by its queue's name alone.
    CONSTRAINT queue_systems_told_by_prefix CHECK (queue_prefix <> '' OR NOT (retries_in_place OR names_connection_in_queue)),
    -- A letter's connection comes from one place: its queue's name, or the
    -- system's default when the capture named none.
    CONSTRAINT queue_systems_one_connection_source CHECK ((default_connection IS NULL) = names_connection_in_queue)
);
COMMENT ON TABLE expiryctl.queue_systems IS 'The queue systems the archive takes letters of, one a driver, registered by `expiryctl migrate`; a row that letters reference is never deleted.';
COMMENT ON COLUMN expiryctl.queue_systems.name IS 'The name letters carry in dead_letters.source_system.';
COMMENT ON COLUMN expiryctl.queue_systems.queue_prefix IS 'How the system''s queue names begin; empty for the one system whose queue names are plain. No prefix begins another.';
COMMENT ON COLUMN expiryctl.queue_systems.retries_in_place IS 'A replay retries the failed job where the system keeps it, in the queue it was captured from, rather than publishing a copy (a job store).';
COMMENT ON COLUMN expiryctl.queue_systems.names_connection_in_queue IS 'A letter''s queue name is queue_prefix || connection || ''/…''.';
COMMENT ON COLUMN expiryctl.queue_systems.default_connection IS 'The connection a letter captured without one names; NULL when its queue''s name gives it.';

INSERT INTO expiryctl.queue_systems (name, queue_prefix, retries_in_place, names_connection_in_queue, default_connection) VALUES
    ('rabbitmq', '', false, false, 'rabbitmq'),
    ('sqs', 'arn:aws:sqs:', false, false, 'sqs'),
    ('river', 'river://', true, true, NULL),
    ('bullmq', 'bullmq://', true, true, NULL),
    ('jobtable', 'jobtable://', true, true, NULL);

ALTER TABLE expiryctl.queue_systems ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.queue_systems FOR SELECT USING (true);
GRANT SELECT ON expiryctl.queue_systems TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;

ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_connection_named,
    DROP CONSTRAINT dead_letters_system_names_queue,
    DROP CONSTRAINT dead_letters_source_system_check,
    ADD CONSTRAINT dead_letters_source_system_fkey FOREIGN KEY (source_system) REFERENCES expiryctl.queue_systems (name) NOT VALID;
COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: a name of queue_systems.';

-- +goose Down
-- The checks come back as 00041 left them, NOT VALID as they were: a
-- letter of a system registered since stays as it is.
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.dead_letters DROP CONSTRAINT dead_letters_source_system_fkey,
    ADD CONSTRAINT dead_letters_source_system_check
        CHECK (source_system IN ('rabbitmq', 'sqs', 'river', 'bullmq', 'jobtable')) NOT VALID,
    ADD CONSTRAINT dead_letters_system_names_queue
        CHECK ((source_system = 'sqs') = (source_queue LIKE 'arn:aws:sqs:%')
           AND (source_system = 'river') = (source_queue LIKE 'river://%')
           AND (source_system = 'bullmq') = (source_queue LIKE 'bullmq://%')
           AND (source_system = 'jobtable') = (source_queue LIKE 'jobtable://%')) NOT VALID,
    ADD CONSTRAINT dead_letters_connection_named
        CHECK (connection ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
               AND (source_system NOT IN ('river', 'bullmq', 'jobtable')
                    OR source_queue LIKE source_system || '://' || connection || '/%')) NOT VALID;
COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: rabbitmq, sqs, river, bullmq or jobtable.';
DROP TABLE expiryctl.queue_systems;
