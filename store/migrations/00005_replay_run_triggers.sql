-- The replay run's hot path: a run updates every item twice (publishing,
-- then confirmed), a thousand at a time. The rules stay as 00003 states them;
-- only the work done to check them on that path shrinks.

-- +goose Up

-- The frozen-cohort check on UPDATE fired a PL/pgSQL call for every row a
-- run touched, to find that no frozen column had changed. The WHEN clause
-- asks the same question in the executor, and the function is called only
-- when the answer is yes (then it refuses). Inserts and deletes are checked
-- by the function as before.
DROP TRIGGER replay_items_guard ON expiryctl.replay_items;
CREATE TRIGGER replay_items_guard BEFORE INSERT OR DELETE ON expiryctl.replay_items
    FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_items_guard();
CREATE TRIGGER replay_items_frozen BEFORE UPDATE ON expiryctl.replay_items
    FOR EACH ROW
    WHEN (NEW.request_id IS DISTINCT FROM OLD.request_id OR NEW.dead_letter_id IS DISTINCT FROM OLD.dead_letter_id
          OR NEW.ordinal IS DISTINCT FROM OLD.ordinal OR NEW.payload_sha256 IS DISTINCT FROM OLD.payload_sha256)
    EXECUTE FUNCTION expiryctl.replay_items_guard();

-- +goose StatementBegin
-- Items move (publishing, confirmed, failed, skipped) only while their
-- request runs. A run's statements touch the items of one running request:
-- asking first whether any request in the statement is not running settles
-- them with one look-up, and only otherwise are old and new rows matched to
-- find an item that moved.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM expiryctl.replay_requests r
                   WHERE r.id IN (SELECT DISTINCT n.request_id FROM new_rows n) AND r.status <> 'running') THEN
        RETURN NULL;
    END IF;
    SELECT n.request_id, r.status INTO bad
    FROM new_rows n
    JOIN old_rows o ON o.request_id = n.request_id AND o.dead_letter_id = n.dead_letter_id
    JOIN expiryctl.replay_requests r ON r.id = n.request_id
    WHERE n.state <> o.state AND n.state IN ('publishing', 'confirmed', 'failed', 'skipped')
      AND r.status <> 'running'
    LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: items move only while it runs', bad.request_id, bad.status));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER replay_items_frozen ON expiryctl.replay_items;
DROP TRIGGER replay_items_guard ON expiryctl.replay_items;
CREATE TRIGGER replay_items_guard BEFORE INSERT OR UPDATE OR DELETE ON expiryctl.replay_items
    FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_items_guard();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_items_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.request_id, r.status INTO bad
    FROM new_rows n
    JOIN old_rows o ON o.request_id = n.request_id AND o.dead_letter_id = n.dead_letter_id
    JOIN expiryctl.replay_requests r ON r.id = n.request_id
    WHERE n.state <> o.state AND n.state IN ('publishing', 'confirmed', 'failed', 'skipped')
      AND r.status <> 'running'
    LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: items move only while it runs', bad.request_id, bad.status));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
