-- replay_items_refuse_rewrite is the trigger behind
-- replay_items_no_rewrite. A confirmed item keeps what confirmed it; an
-- item closed stays closed; the count of its sends, which bounds its
-- publishes (replay_items_send), never goes back.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s: a closed item is not reopened, and attempts, sends and confirm times are not rewritten',
        OLD.dead_letter_id, OLD.request_id));
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_rewrite() FROM PUBLIC;
