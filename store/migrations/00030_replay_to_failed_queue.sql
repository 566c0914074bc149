-- +goose Up
-- A replay goes back to the queue its letter failed in (issue 32): through
-- the default exchange, so that no other queue bound to the letter's
-- original exchange (billing, an audit tap) gets another copy. A request
-- says via_exchange to publish through the original exchange as before.
-- Requests made before this migration were frozen, and approved, with
-- their targets on the exchange: they keep them.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.replay_requests ADD COLUMN via_exchange boolean NOT NULL DEFAULT true;
ALTER TABLE expiryctl.replay_requests ALTER COLUMN via_exchange SET DEFAULT false;

DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets OR NEW.via_exchange IS DISTINCT FROM OLD.via_exchange)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();
ALTER TABLE expiryctl.replay_requests DROP COLUMN via_exchange;
