-- +goose Up
-- A run watches its own outcomes (issue 32). While a replay runs, and for
-- its canary window after, the runner captures the dead-letter queues its
-- cohort came from, so its stop conditions see the jobs that die again
-- without a separate `dlq ingest --follow`; replay_run_start refuses a run
-- that watches none of them (rule dlq-unwatched) unless the request says
-- why it need not (unwatched_why, frozen with the handler flags and shown
-- to the approver). Requests made before this migration are held to it
-- too: their runs capture as new ones do.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.replay_requests ADD COLUMN unwatched_why text
    CONSTRAINT replay_requests_unwatched_why CHECK (unwatched_why IS NULL OR btrim(unwatched_why) <> '');

DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets OR NEW.via_exchange IS DISTINCT FROM OLD.via_exchange
          OR NEW.not_before IS DISTINCT FROM OLD.not_before OR NEW.include_not_due IS DISTINCT FROM OLD.include_not_due
          OR NEW.unwatched_why IS DISTINCT FROM OLD.unwatched_why)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TRIGGER replay_requests_handler_frozen ON expiryctl.replay_requests;
CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests
    FOR EACH ROW
    WHEN (NEW.same_handler_ok IS DISTINCT FROM OLD.same_handler_ok OR NEW.same_handler_why IS DISTINCT FROM OLD.same_handler_why
          OR NEW.include_permanent IS DISTINCT FROM OLD.include_permanent OR NEW.failed_under IS DISTINCT FROM OLD.failed_under
          OR NEW.targets IS DISTINCT FROM OLD.targets OR NEW.via_exchange IS DISTINCT FROM OLD.via_exchange
          OR NEW.not_before IS DISTINCT FROM OLD.not_before OR NEW.include_not_due IS DISTINCT FROM OLD.include_not_due)
    EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();
ALTER TABLE expiryctl.replay_requests DROP COLUMN unwatched_why;
