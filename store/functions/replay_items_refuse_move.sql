-- replay_items_refuse_move is the trigger behind replay_items_moves.
-- An item's state moves pending -> publishing -> confirmed | failed |
-- skipped, pending -> skipped | failed (decided before publishing), and,
-- for a discard, pending -> confirmed. publishing -> pending returns an
-- item that was marked but not published (a run stopping, or a resume).
-- A decided item never moves again. The trigger's WHEN clause lets every
-- allowed move through without calling this.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_refuse_move() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.state = 'pending' AND NEW.state = 'confirmed'
       AND (SELECT kind FROM expiryctl.replay_requests WHERE id = NEW.request_id) = 'discard' THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s is %s and cannot become %s: items move pending -> publishing -> confirmed, failed or skipped, and a decided item never moves again',
        OLD.dead_letter_id, OLD.request_id, OLD.state, NEW.state));
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_move() FROM PUBLIC;
