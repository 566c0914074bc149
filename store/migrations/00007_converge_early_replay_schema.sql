-- Migrations 00001 to 00003 were edited after a version of expiryctl had
-- shipped them, and goose never applies a migration twice: a database
-- migrated by that version kept the old forms. The one that matters lacks
-- the statement trigger that lets replay items move only while their request
-- runs (00003 added it in place of a per-row check, which 00005 then limited
-- to frozen columns), so on such a database nothing enforced that rule.
-- This brings such a database to what 00001-00006 build today, and changes
-- nothing on one they built.
--
-- Left as it was: the request guard of that version kept an old halt reason
-- on a halted request's new approval (today's clears it); that is what the
-- request shows, not a rule.

-- +goose Up
DROP TRIGGER IF EXISTS replay_items_state_guard ON expiryctl.replay_items;
CREATE TRIGGER replay_items_state_guard AFTER UPDATE ON expiryctl.replay_items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.replay_items_state_guard();

-- Indexes no query uses, each costing every write.
DROP INDEX IF EXISTS expiryctl.replay_items_state;
DROP INDEX IF EXISTS expiryctl.dead_letters_reservation;

ALTER TABLE expiryctl.replay_items SET (fillfactor = 70);

-- +goose Down
-- Nothing to undo: the schema is the one 00001-00006 build.
SELECT 1;
