-- +goose Up
-- A bound on publishes (issue 30). A resumed run publishes again every item
-- an earlier run left publishing, since nobody knows whether its copy
-- reached the broker; a run made to stop again and again (its lock session
-- killed, its start held open in another session) published the same
-- letters without end. sends counts the runs cleared to publish an item,
-- each cleared (replay_items_send) before it publishes: a true upper bound
-- on the copies of it any run sent under its request. Once it reaches the
-- bound, the item is not published again: replay_run_start fails it, and
-- only a new request can send its letter. The functions hold it at 3
-- (replay_publish_bound); the constraint holds it against a bug in them,
-- and the trigger against a count going back.
--
-- An item publishing when this runs may have been sent already, perhaps
-- more than once, and its earlier runs kept no count: it starts at 1, the
-- least it can have been, rather than 0.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.replay_items
    ADD COLUMN sends smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT replay_items_publish_bound CHECK (sends BETWEEN 0 AND 3);

UPDATE expiryctl.replay_items SET sends = 1 WHERE state = 'publishing';

DROP TRIGGER replay_items_no_rewrite ON expiryctl.replay_items;
CREATE TRIGGER replay_items_no_rewrite BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN ((NEW.open AND NOT OLD.open) OR NEW.attempts < OLD.attempts OR NEW.sends < OLD.sends
          OR (OLD.confirmed_at IS NOT NULL AND NEW.confirmed_at IS DISTINCT FROM OLD.confirmed_at))
    EXECUTE FUNCTION expiryctl.replay_items_refuse_rewrite();

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TRIGGER replay_items_no_rewrite ON expiryctl.replay_items;
CREATE TRIGGER replay_items_no_rewrite BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN ((NEW.open AND NOT OLD.open) OR NEW.attempts < OLD.attempts
          OR (OLD.confirmed_at IS NOT NULL AND NEW.confirmed_at IS DISTINCT FROM OLD.confirmed_at))
    EXECUTE FUNCTION expiryctl.replay_items_refuse_rewrite();
ALTER TABLE expiryctl.replay_items DROP CONSTRAINT replay_items_publish_bound, DROP COLUMN sends;
