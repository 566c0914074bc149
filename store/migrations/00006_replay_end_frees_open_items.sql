-- When a request ends, its trigger frees the letters of the items still open.
-- It found them by joining every item of the request to the archive, and the
-- planner, going by statistics taken when all the items were open, chose to
-- read the whole archive: half a second or more at the end of a 50,000-item
-- run whose items had all been closed as they were confirmed (and the read
-- pruned every page it passed, in the run's time). Now the open items are
-- found by an index of their own, usually none, and their letters by id.

-- +goose Up
CREATE INDEX replay_items_open_by_request ON expiryctl.replay_items (request_id) WHERE open;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letters d SET status = 'dead'
         WHERE d.id = ANY (ARRAY(SELECT i.dead_letter_id FROM expiryctl.replay_items i
                                  WHERE i.request_id = NEW.id AND i.open))
           AND d.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letters d SET status = 'dead'
          FROM expiryctl.replay_items i
         WHERE i.request_id = NEW.id AND i.dead_letter_id = d.id AND i.open
           AND d.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP INDEX expiryctl.replay_items_open_by_request;
