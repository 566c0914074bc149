-- tally_dead_letter_signals is the statement trigger that keeps the
-- triage's tallies of dead_letter_states (per category, error class,
-- status and attempts; waiting letters per hour due and category;
-- arrivals per hour and category), so that `dlq summary` reads counts,
-- not the archive.
CREATE OR REPLACE FUNCTION expiryctl.tally_dead_letter_signals() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- As in tally_dead_letters: each change is a -1 for an old row and a +1
    -- for a new one, summed per key and upserted in key order, so that
    -- concurrent writers lock tally rows in the same order and cannot
    -- deadlock. An UPDATE that moves no key (a redaction) writes nothing.
    -- A transition table exists only for the events that have it, hence a
    -- branch per event.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*)
        FROM new_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, count(*)
        FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_arrival_tallies AS t (dead_hour, reason_category, letters)
        SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, count(*)
        FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (dead_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, sum(delta)
        FROM (SELECT reason_category, error_class, status, attempts, -1 AS delta FROM old_rows
              UNION ALL
              SELECT reason_category, error_class, status, attempts, 1 FROM new_rows) AS changes
        GROUP BY 1, 2, 3, 4 HAVING sum(delta) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, sum(delta)
        FROM (SELECT due_at, reason_category, -1 AS delta FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
              UNION ALL
              SELECT due_at, reason_category, 1 FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL) AS changes
        GROUP BY 1, 2 HAVING sum(delta) <> 0 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
        -- No arrival tally moves on an UPDATE: it counts by dead_lettered_at
        -- and reason_category, which dead_letter_states_frozen refuses to
        -- change, so summing the old and new rows (a time zone conversion
        -- each, for every replayed or requested letter) only ever gave 0.
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, -count(*)
        FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, -count(*)
        FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_arrival_tallies AS t (dead_hour, reason_category, letters)
        SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, -count(*)
        FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (dead_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.tally_dead_letter_signals() FROM PUBLIC;
