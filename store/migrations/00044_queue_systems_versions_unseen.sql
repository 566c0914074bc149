-- +goose Up
-- A system whose consumers show but not which handler each runs (BullMQ's
-- Workers) gives the handler check nothing to tell a fixed handler by: a
-- run of its request was refused after approval unless the request
-- vouched for the handler (--same-handler-ok). consumers_unseen (00043)
-- now says why for such a system too, so that replay_request_create refuses
-- the request when it is made (rule handler-unseen), as it does for a
-- system that shows no consumers. The migrate writes the drivers' words
-- (queue_systems_register); this seeds BullMQ's, so that a migrate that
-- registers no system leaves the rule in force.
SET LOCAL search_path TO pg_catalog, pg_temp;

COMMENT ON COLUMN expiryctl.queue_systems.consumers_unseen IS 'Why the system shows nobody consuming a queue, or not which handler version each consumer runs, so that a replay''s handler check cannot verify a fixed handler and its request must vouch for the handler (rule handler-unseen); NULL when its consumers say their versions.';

UPDATE expiryctl.queue_systems
   SET consumers_unseen = 'BullMQ shows the Workers of a queue but not which handler each runs: nothing can tell a fixed handler from the one that failed'
 WHERE name = 'bullmq';

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
UPDATE expiryctl.queue_systems SET consumers_unseen = NULL WHERE name = 'bullmq';
COMMENT ON COLUMN expiryctl.queue_systems.consumers_unseen IS 'Why the system shows nobody consuming a queue, so that a replay''s handler check has nothing to read and its request must vouch for the handler (rule handler-unseen); NULL when it shows its consumers.';
