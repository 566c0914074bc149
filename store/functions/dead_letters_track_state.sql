-- dead_letters_track_state gives every new letter its row in
-- dead_letter_states (status dead), from the statement's new rows.
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_track_state() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A statement trigger, not a default or the ingest function's work:
    -- every letter gets its state row, however it was inserted.
    INSERT INTO expiryctl.dead_letter_states (dead_letter_id, reason_category, source_queue, error_class, attempts,
        dead_lettered_at, due_at)
    SELECT id, reason_category, source_queue, error_class, attempts, dead_lettered_at, due_at
    FROM new_rows ORDER BY id;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.dead_letters_track_state() FROM PUBLIC;
