-- +goose Up
-- The incident signals of `dlq summary` (issue 13) must cost about the same
-- on a million letters as on ten thousand, and nearly every waiting letter
-- is past its deadline (a job reaches the DLQ after its hold ran out), so
-- "how many are overdue, and by how much" and "which error classes, after
-- how many attempts" are questions about the whole backlog, and an
-- incident can bring a day's letters in an hour. Like dead_letter_tallies
-- (00001), three tables kept by statement triggers answer them, and the
-- arrival rates, without reading the letters:
--
-- dead_letter_class_tallies counts letters per category, error class,
-- status and attempt count: the counts by class and their attempt
-- distribution are sums over a few hundred rows.
--
-- dead_letter_due_tallies counts the waiting letters (dead or in a
-- request) per UTC hour of their due_at. An overdue count is the sum of
-- the hours before the current one plus the current hour's letters read
-- from dead_letters_waiting_due; a lateness percentile finds the hour that
-- holds its rank from the sums and reads only that hour's letters from the
-- index, at an offset. The cost follows how many hours the backlog spans
-- and how many letters one hour holds, not how many letters there are.
--
-- dead_letter_arrival_tallies counts letters per UTC hour of
-- dead_lettered_at and category, whatever became of them: an arrival rate
-- over 24 hours sums the whole hours inside the window and reads only its
-- partial first and last hours from dead_letters_category_newest, so it
-- does not read a day of letters however fast they arrive.
CREATE TABLE expiryctl.dead_letter_class_tallies (
    reason_category text    NOT NULL,
    error_class     text    NOT NULL, -- '' for a letter without one
    status          text    NOT NULL,
    attempts        integer NOT NULL,
    letters         bigint  NOT NULL,
    PRIMARY KEY (reason_category, error_class, status, attempts)
);
COMMENT ON TABLE expiryctl.dead_letter_class_tallies IS
    'Letters per category, error class, status and attempts, kept by dead_letters'' statement triggers.';

CREATE TABLE expiryctl.dead_letter_due_tallies (
    due_hour timestamptz NOT NULL PRIMARY KEY, -- date_trunc('hour', due_at, 'UTC')
    letters  bigint      NOT NULL
);
COMMENT ON TABLE expiryctl.dead_letter_due_tallies IS
    'Waiting letters (dead or in_request) per UTC hour of due_at, kept by dead_letters'' statement triggers.';

CREATE TABLE expiryctl.dead_letter_arrival_tallies (
    dead_hour       timestamptz NOT NULL, -- date_trunc('hour', dead_lettered_at, 'UTC')
    reason_category text        NOT NULL,
    letters         bigint      NOT NULL,
    PRIMARY KEY (dead_hour, reason_category)
);
COMMENT ON TABLE expiryctl.dead_letter_arrival_tallies IS
    'Letters per UTC hour of dead_lettered_at and category, kept by dead_letters'' statement triggers.';

-- The current hour's overdue letters and the letters of the hour a
-- percentile falls in, in due_at order, read from the index alone.
CREATE INDEX dead_letters_waiting_due ON expiryctl.dead_letters (due_at)
    WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION expiryctl.tally_dead_letter_signals() RETURNS trigger
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

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), count(*)
        FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (due_hour)
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

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), sum(delta)
        FROM (SELECT due_at, -1 AS delta FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
              UNION ALL
              SELECT due_at, 1 FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL) AS changes
        GROUP BY 1 HAVING sum(delta) <> 0 ORDER BY 1
        ON CONFLICT (due_hour)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_arrival_tallies AS t (dead_hour, reason_category, letters)
        SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, sum(delta)
        FROM (SELECT dead_lettered_at, reason_category, -1 AS delta FROM old_rows
              UNION ALL
              SELECT dead_lettered_at, reason_category, 1 FROM new_rows) AS changes
        GROUP BY 1, 2 HAVING sum(delta) <> 0 ORDER BY 1, 2
        ON CONFLICT (dead_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, -count(*)
        FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), -count(*)
        FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (due_hour)
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
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION expiryctl.tally_dead_letter_signals() FROM PUBLIC;

CREATE TRIGGER dead_letters_signal_tally_insert AFTER INSERT ON expiryctl.dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letters_signal_tally_update AFTER UPDATE ON expiryctl.dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();
CREATE TRIGGER dead_letters_signal_tally_delete AFTER DELETE ON expiryctl.dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();

-- The letters archived before this migration, counted once. The triggers
-- above already hold the table (CREATE TRIGGER locks out writers until
-- this migration commits), so no letter is counted twice or missed.
INSERT INTO expiryctl.dead_letter_class_tallies (reason_category, error_class, status, attempts, letters)
SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*)
FROM expiryctl.dead_letters GROUP BY 1, 2, 3, 4;
INSERT INTO expiryctl.dead_letter_due_tallies (due_hour, letters)
SELECT date_trunc('hour', due_at, 'UTC'), count(*)
FROM expiryctl.dead_letters WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL GROUP BY 1;
INSERT INTO expiryctl.dead_letter_arrival_tallies (dead_hour, reason_category, letters)
SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, count(*)
FROM expiryctl.dead_letters GROUP BY 1, 2;

-- Read as dead_letter_tallies is: by the groups that read the archive.
GRANT SELECT ON expiryctl.dead_letter_class_tallies, expiryctl.dead_letter_due_tallies, expiryctl.dead_letter_arrival_tallies
    TO expiryctl_operator, expiryctl_approver, expiryctl_admin;

-- +goose Down
DROP TRIGGER dead_letters_signal_tally_delete ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_signal_tally_update ON expiryctl.dead_letters;
DROP TRIGGER dead_letters_signal_tally_insert ON expiryctl.dead_letters;
DROP FUNCTION expiryctl.tally_dead_letter_signals();
DROP INDEX expiryctl.dead_letters_waiting_due;
DROP TABLE expiryctl.dead_letter_arrival_tallies;
DROP TABLE expiryctl.dead_letter_due_tallies;
DROP TABLE expiryctl.dead_letter_class_tallies;
