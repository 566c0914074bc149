-- dead_letter_states_refuse_change is the trigger behind
-- dead_letter_states_frozen and dead_letter_states_no_delete: of a
-- letter's state row only the status moves (the trigger's WHEN lets that
-- through without calling this), and no state row is ever deleted.
CREATE OR REPLACE FUNCTION expiryctl.dead_letter_states_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format(
            'the state of dead letter %s cannot be deleted: the archive keeps every letter and what became of it', OLD.dead_letter_id));
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: of its state, only the status moves', OLD.dead_letter_id));
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.dead_letter_states_refuse_change() FROM PUBLIC;
