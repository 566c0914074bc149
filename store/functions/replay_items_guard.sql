-- replay_items_guard is the trigger behind replay_items_guard and
-- replay_items_frozen. The cohort is frozen: items are written only in the
-- transaction that created their request, never deleted, and only their run
-- state changes.
CREATE OR REPLACE FUNCTION expiryctl.replay_items_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', 'replay items are never deleted');
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO req FROM expiryctl.replay_requests WHERE id = NEW.request_id;
        IF req.created_xid <> pg_current_xact_id() THEN
            PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                'the cohort of replay request %s was frozen when it was made: nothing can be added', NEW.request_id));
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.request_id <> OLD.request_id OR NEW.dead_letter_id <> OLD.dead_letter_id
       OR NEW.ordinal <> OLD.ordinal OR NEW.payload_sha256 <> OLD.payload_sha256
       OR NEW.retry_after IS DISTINCT FROM OLD.retry_after THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', format('the cohort of replay request %s is frozen', OLD.request_id));
    END IF;
    RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_items_guard() FROM PUBLIC;
