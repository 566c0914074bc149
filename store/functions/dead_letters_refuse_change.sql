-- dead_letters_refuse_change is the trigger behind dead_letters_immutable
-- and dead_letters_no_delete: a captured letter is evidence, so its
-- identity, payload, properties and headers never change and it is never
-- deleted. The one change allowed is retention's redaction.
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    -- A redaction empties the payload and the headers and changes nothing
    -- else: the columns its state row copies included, which would
    -- otherwise disagree with the letter.
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.properties IS NOT DISTINCT FROM OLD.properties
       AND NEW.source_system = OLD.source_system AND NEW.native IS NOT DISTINCT FROM OLD.native
       AND NEW.dead_lettered_at = OLD.dead_lettered_at
       AND NEW.reason_category = OLD.reason_category AND NEW.source_queue = OLD.source_queue
       AND NEW.error_class IS NOT DISTINCT FROM OLD.error_class AND NEW.attempts = OLD.attempts
       AND NEW.due_at IS NOT DISTINCT FROM OLD.due_at AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload, properties and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.dead_letters_refuse_change() FROM PUBLIC;
