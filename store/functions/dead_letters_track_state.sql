-- dead_letters_track_state gives every new letter its row in
-- dead_letter_states (status dead), from the statement's new rows, once
-- each is named as its queue system names its letters (queue_systems):
-- its queue begins with the system's prefix and with no other system's
-- non-empty one, so that a queue's name says its system
-- (dead_letters_system_names_queue), and its connection is a name, which
-- a job store's queue carries, PREFIX || CONNECTION || '/…'
-- (dead_letters_connection_named): a letter never names a server to dial.
-- Those were CHECK constraints while the systems were written into them;
-- a CHECK cannot read the table, and this trigger already sees every
-- letter inserted, whoever inserts it. A letter's system, queue and
-- connection never change after capture (dead_letters_immutable).
CREATE OR REPLACE FUNCTION expiryctl.dead_letters_track_state() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bad record;
BEGIN
    SELECT * INTO bad FROM (
        SELECT n.id, n.source_system, n.source_queue, n.connection, q.queue_prefix, o.name AS other,
               CASE WHEN q.name IS NULL THEN NULL -- the foreign key's to refuse
                    WHEN NOT starts_with(n.source_queue, q.queue_prefix) OR o.name IS NOT NULL
                        THEN 'dead_letters_system_names_queue'
                    WHEN n.connection !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
                         OR q.names_connection_in_queue AND NOT starts_with(n.source_queue, q.queue_prefix || n.connection || '/')
                        THEN 'dead_letters_connection_named'
               END AS broken
          FROM new_rows n LEFT JOIN expiryctl.queue_systems q ON q.name = n.source_system
          LEFT JOIN LATERAL (SELECT o.name FROM expiryctl.queue_systems o
                              WHERE o.name <> n.source_system AND o.queue_prefix <> '' AND starts_with(n.source_queue, o.queue_prefix)
                              ORDER BY o.name LIMIT 1) o ON true) c
     WHERE c.broken IS NOT NULL
     ORDER BY c.id LIMIT 1;
    IF FOUND AND bad.broken = 'dead_letters_system_names_queue' THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = bad.broken, SCHEMA = 'expiryctl', TABLE = 'dead_letters',
            MESSAGE = 'new row for relation "dead_letters" violates constraint "dead_letters_system_names_queue": '
                || CASE WHEN bad.other IS NOT NULL
                        THEN format('a letter of the queue system %s names the queue %L, which is named as the system %s names its queues',
                                    bad.source_system, bad.source_queue, bad.other)
                        ELSE format('a letter of the queue system %s names the queue %L, which does not begin with %L as that system''s queue names do',
                                    bad.source_system, bad.source_queue, bad.queue_prefix) END;
    ELSIF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = bad.broken, SCHEMA = 'expiryctl', TABLE = 'dead_letters',
            MESSAGE = 'new row for relation "dead_letters" violates constraint "dead_letters_connection_named": '
                || CASE WHEN bad.connection !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
                        THEN format('a letter names the connection %L, which is no connection''s name (letters, digits, ".", "_" and "-", at most 63, a letter or digit first): a letter names the connection it came from, never a server',
                                    bad.connection)
                        ELSE format('a letter of the queue system %s names the connection %L and the queue %L, which names another: its queue is named %sCONNECTION/…',
                                    bad.source_system, bad.connection, bad.source_queue, bad.queue_prefix) END;
    END IF;
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
