-- replay_request_ended is the trigger that frees a request's letters when
-- it ends (rejected, expired, completed or cancelled): the letters its
-- open items held are dead again, free for another request, and the
-- items close.
CREATE OR REPLACE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letter_states s SET status = 'dead'
         WHERE s.dead_letter_id = ANY (ARRAY(SELECT i.dead_letter_id FROM expiryctl.replay_items i
                                  WHERE i.request_id = NEW.id AND i.open))
           AND s.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_request_ended() FROM PUBLIC;
