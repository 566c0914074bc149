-- queue_systems_register is how `expiryctl migrate` registers the queue
-- systems its drivers describe (store.MigrateDeployment), one element of
-- each array a system: it adds the systems queue_systems lacks, changes
-- those whose row differs, and deletes none, so that a letter never loses
-- its system. It refuses, naming the system:
--   - a row the table's constraints would refuse (a name that is not a
--     lower-case identifier, a job store with no queue prefix, a default
--     connection for a system whose queue names carry it, or none for one
--     whose do not, or words of why it shows no consumers that are
--     blank, hold a control character or run past 300 characters), with
--     what to write instead;
--   - a queue prefix that begins another system's, or that another's
--     begins (two empty ones among them): a queue's name says its system,
--     for the summary and for dead_letters_system_names_queue;
--   - a prefix under which the archive already holds another system's
--     queue, whose letters it would take over;
--   - a change of how a system names its queues, or of whether it retries
--     in place, while the archive holds letters of it: they were captured,
--     and requests of them approved, under the rule they have.
-- A system's default connection may change: it names the connection of
-- letters captured from now on. So may its consumers_unseen, words of why
-- it shows nobody consuming a queue (NULL when it shows its consumers),
-- which replay_request_create reads as each request is made (rule
-- handler-unseen). Returns each system added or changed.
-- Only the schema's owner, which migrates, executes it; the row of each
-- system it changes is locked first, so that a capture of that system's
-- letters (whose foreign key check shares the row) is either before it, and
-- seen by it, or after it.
CREATE OR REPLACE FUNCTION expiryctl.queue_systems_register(systems text[], queue_prefixes text[], in_place boolean[],
    connection_in_queue boolean[], default_connections text[], consumers_unseen text[])
RETURNS TABLE(queue_system text, change text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    n integer := coalesce(cardinality(systems), 0);
    problem text;
    clash record;
    held text;
    changing text;
BEGIN
    IF coalesce(cardinality(queue_prefixes), 0) <> n OR coalesce(cardinality(in_place), 0) <> n
       OR coalesce(cardinality(connection_in_queue), 0) <> n OR coalesce(cardinality(default_connections), 0) <> n
       OR coalesce(cardinality(queue_systems_register.consumers_unseen), 0) <> n THEN
        RAISE EXCEPTION 'queue_systems_register takes one name, queue prefix, retries_in_place, names_connection_in_queue, default connection and consumers_unseen for each system'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    -- One registration at a time; letters are captured and read meanwhile.
    LOCK TABLE expiryctl.queue_systems IN SHARE ROW EXCLUSIVE MODE;

    SELECT CASE
        WHEN g.name IS NULL OR g.name !~ '^[a-z][a-z0-9_]{0,62}$' THEN
            format('queue system name %L: use lower-case letters, digits and "_", a letter first, at most 63', g.name)
        WHEN count(*) OVER (PARTITION BY g.name) > 1 THEN
            format('queue system %s is registered twice in one migrate: each driver registers its own', g.name)
        WHEN g.prefix IS NULL OR g.prefix !~ '^[!-~]{0,64}$' THEN
            format('queue system %s: queue prefix %L: printable ASCII without spaces, at most 64 characters', g.name, g.prefix)
        WHEN g.retries IS NULL OR g.in_queue IS NULL THEN
            format('queue system %s: say whether a replay retries its jobs in place and whether its queue names carry their connection', g.name)
        WHEN g.prefix = '' AND (g.retries OR g.in_queue) THEN
            format('queue system %s has no queue prefix, but a system whose jobs are retried in place, or whose queue names carry their connection, is told by its queue names'' beginning: give it one (for instance %L)', g.name, g.name || '://')
        WHEN g.in_queue AND g.conn IS NOT NULL THEN
            format('queue system %s names its letters'' connection in their queue names (%sCONNECTION/…), so it takes no default connection', g.name, g.prefix)
        WHEN NOT g.in_queue AND g.conn IS NULL THEN
            format('queue system %s needs a default connection: its queue names carry none, and a capture that names none must name one', g.name)
        WHEN g.conn !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
            format('queue system %s: default connection %L is no connection''s name (letters, digits, ".", "_" and "-", at most 63, a letter or digit first)', g.name, g.conn)
        WHEN NOT (g.unseen ~ '\S' AND char_length(g.unseen) <= 300 AND g.unseen !~ '[\x01-\x1f\x7f-\x9f]') THEN
            format('queue system %s: why it shows no consumers (%L) is printed in refusals: write it as one sentence of printable characters, at most 300, or none for a system that shows its consumers', g.name, left(g.unseen, 80))
        END INTO problem
      FROM unnest(systems, queue_prefixes, in_place, connection_in_queue, default_connections, queue_systems_register.consumers_unseen)
           AS g(name, prefix, retries, in_queue, conn, unseen)
     ORDER BY 1 NULLS LAST LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The systems as they will be: no prefix begins another's.
    WITH given AS (SELECT * FROM unnest(systems, queue_prefixes) AS g(name, prefix)),
         after AS (SELECT name, prefix FROM given
                   UNION ALL
                   SELECT s.name, s.queue_prefix FROM expiryctl.queue_systems s WHERE s.name <> ALL (systems))
    SELECT a.name AS a, a.prefix AS a_prefix, b.name AS b, b.prefix AS b_prefix INTO clash
      FROM after a JOIN after b ON a.name < b.name
     WHERE a.prefix = b.prefix OR (a.prefix <> '' AND starts_with(b.prefix, a.prefix))
        OR (b.prefix <> '' AND starts_with(a.prefix, b.prefix))
     ORDER BY 1, 3 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('queue systems %s and %s: the queue names of %s begin %L and those of %s %L, so a queue''s name would not say which system it is in',
                             clash.a, clash.b, clash.a, clash.a_prefix, clash.b, clash.b_prefix),
                  HINT = 'each system''s queue names begin with a prefix that no other system''s begins with or is the beginning of';
    END IF;

    -- Changes of how a system names or replays its queues wait for the
    -- captures of its letters under way, and are refused once it has any.
    SELECT string_agg(s.name, ', ' ORDER BY s.name) INTO changing
      FROM (SELECT s.name FROM expiryctl.queue_systems s
              JOIN unnest(systems, queue_prefixes, in_place, connection_in_queue) AS g(name, prefix, retries, in_queue) ON g.name = s.name
             WHERE (s.queue_prefix, s.retries_in_place, s.names_connection_in_queue) IS DISTINCT FROM (g.prefix, g.retries, g.in_queue)
             ORDER BY s.name FOR UPDATE OF s) s;
    SELECT string_agg(x, ', ' ORDER BY x) INTO held FROM unnest(string_to_array(changing, ', ')) AS x
     WHERE EXISTS (SELECT 1 FROM expiryctl.dead_letters d WHERE d.source_system = x);
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'the archive holds letters of %, captured and approved under the queue prefix, retries_in_place and names_connection_in_queue it has: a migrate changes none of those of a system with letters',
            held USING ERRCODE = 'object_in_use',
                       HINT = 'register a system of a new name for the new way, or keep the row as it is';
    END IF;
    -- A new or changed prefix must not take over another system's queues.
    SELECT format('%s (queue %L)', g.name, t.source_queue) INTO held
      FROM unnest(systems, queue_prefixes) AS g(name, prefix)
      LEFT JOIN expiryctl.queue_systems s ON s.name = g.name
      JOIN LATERAL (SELECT d.source_queue FROM expiryctl.dead_letter_tallies d
                     WHERE g.prefix <> '' AND starts_with(d.source_queue, g.prefix) AND d.letters > 0 LIMIT 1) t ON true
     WHERE s.queue_prefix IS DISTINCT FROM g.prefix
     ORDER BY g.name LIMIT 1;
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'queue system %: the archive holds letters of another system''s queue that its queue prefix would make its own', held
            USING ERRCODE = 'object_in_use';
    END IF;

    RETURN QUERY
    WITH given AS (SELECT * FROM unnest(systems, queue_prefixes, in_place, connection_in_queue, default_connections,
                                        queue_systems_register.consumers_unseen)
                                AS g(name, prefix, retries, in_queue, conn, unseen)),
         changed AS (
            UPDATE expiryctl.queue_systems s
               SET queue_prefix = g.prefix, retries_in_place = g.retries, names_connection_in_queue = g.in_queue,
                   default_connection = g.conn, consumers_unseen = g.unseen
              FROM given g
             WHERE s.name = g.name
               AND (s.queue_prefix, s.retries_in_place, s.names_connection_in_queue, s.default_connection, s.consumers_unseen)
                   IS DISTINCT FROM (g.prefix, g.retries, g.in_queue, g.conn, g.unseen)
            RETURNING s.name),
         added AS (
            INSERT INTO expiryctl.queue_systems (name, queue_prefix, retries_in_place, names_connection_in_queue, default_connection,
                                                 consumers_unseen)
            SELECT g.name, g.prefix, g.retries, g.in_queue, g.conn, g.unseen FROM given g
             WHERE NOT EXISTS (SELECT 1 FROM expiryctl.queue_systems s WHERE s.name = g.name)
             ORDER BY g.name
            RETURNING name)
    SELECT a.name, 'added' FROM added a
    UNION ALL
    SELECT c.name, 'changed' FROM changed c
    ORDER BY 1;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.queue_systems_register(systems text[], queue_prefixes text[], in_place boolean[], connection_in_queue boolean[], default_connections text[], consumers_unseen text[]) FROM PUBLIC;
