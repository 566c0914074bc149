-- replay_items_refuse_early_close is the trigger behind
-- replay_items_no_early_close. An item is closed (its letter free for
-- another request) when it is confirmed or its request ends, never while
-- its request is open.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_refuse_early_close() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (SELECT status FROM expiryctl.replay_requests WHERE id = NEW.request_id) IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('item-states', format(
            'item %s of replay request %s is %s and its request is open: it keeps its letter until it is confirmed or the request ends',
            OLD.dead_letter_id, OLD.request_id, NEW.state));
    END IF;
    RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_early_close() FROM PUBLIC;
