-- +goose Up
-- A replay that respects time (issue 32). A request may name not_before, a
-- time before which none of its letters is published; each item freezes
-- the Retry-After its letter's last error carried (retry_after); and a
-- letter whose hold is not yet due (due_at) waits for it unless the request
-- says include_not_due. replay_items_send refuses to clear a publish
-- before the latest of the three. Requests made before this migration
-- published whenever they ran: they keep include_not_due.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.replay_requests ADD COLUMN not_before timestamptz;
ALTER TABLE expiryctl.replay_requests ADD COLUMN include_not_due boolean NOT NULL DEFAULT true;
ALTER TABLE expiryctl.replay_requests ALTER COLUMN include_not_due SET DEFAULT false;
ALTER TABLE expiryctl.replay_items ADD COLUMN retry_after timestamptz;

DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets OR NEW.via_exchange IS DISTINCT FROM OLD.via_exchange
          OR NEW.not_before IS DISTINCT FROM OLD.not_before OR NEW.include_not_due IS DISTINCT FROM OLD.include_not_due)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();

DROP TRIGGER replay_items_frozen ON expiryctl.replay_items;
CREATE TRIGGER replay_items_frozen BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN (NEW.request_id IS DISTINCT FROM OLD.request_id OR NEW.dead_letter_id IS DISTINCT FROM OLD.dead_letter_id
          OR NEW.ordinal IS DISTINCT FROM OLD.ordinal OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256
          OR NEW.retry_after IS DISTINCT FROM OLD.retry_after)
    EXECUTE FUNCTION expiryctl.replay_items_guard();

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TRIGGER replay_items_frozen ON expiryctl.replay_items;
CREATE TRIGGER replay_items_frozen BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN (NEW.request_id IS DISTINCT FROM OLD.request_id OR NEW.dead_letter_id IS DISTINCT FROM OLD.dead_letter_id
          OR NEW.ordinal IS DISTINCT FROM OLD.ordinal OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256)
    EXECUTE FUNCTION expiryctl.replay_items_guard();
DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets OR NEW.via_exchange IS DISTINCT FROM OLD.via_exchange)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();
ALTER TABLE expiryctl.replay_items DROP COLUMN retry_after;
ALTER TABLE expiryctl.replay_requests DROP COLUMN include_not_due;
ALTER TABLE expiryctl.replay_requests DROP COLUMN not_before;
