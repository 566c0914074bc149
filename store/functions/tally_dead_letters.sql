-- tally_dead_letters is the statement trigger that keeps
-- dead_letter_tallies, the letters per category, source queue and status.
CREATE OR REPLACE FUNCTION expiryctl.tally_dead_letters() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Rows are upserted in key order so that concurrent writers lock tallies in
    -- the same order and cannot deadlock.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, sum(delta)
        FROM (SELECT reason_category, source_queue, status, -1 AS delta FROM old_rows
              UNION ALL
              SELECT reason_category, source_queue, status, 1 FROM new_rows) AS changes
        GROUP BY 1, 2, 3 HAVING sum(delta) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.tally_dead_letters() FROM PUBLIC;
