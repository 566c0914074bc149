-- +goose Up
-- Overdue split by category (issue 32). A letter that failed for good
-- (conflict, validation, malformed, not-found: the hold moved on or the
-- job is wrong) is overdue as long as it waits, but no retry fixes it:
-- paging on it wakes someone for nothing. So the due tallies count per
-- category too, and the summary, the metrics and the alerts tell the
-- permanent categories apart. The tallies are counted again from the
-- letters, under a lock that keeps a capture from writing them meanwhile:
-- a capture that writes during the upgrade fails its batch, which it
-- never acknowledged, and stores it once the new trigger
-- (tally_dead_letter_signals) is in place.
SET LOCAL search_path TO pg_catalog, pg_temp;

LOCK TABLE expiryctl.dead_letter_due_tallies IN ACCESS EXCLUSIVE MODE;
DELETE FROM expiryctl.dead_letter_due_tallies;
ALTER TABLE expiryctl.dead_letter_due_tallies
    DROP CONSTRAINT dead_letter_due_tallies_pkey,
    ADD COLUMN reason_category text NOT NULL,
    ADD CONSTRAINT dead_letter_due_tallies_pkey PRIMARY KEY (due_hour, reason_category);
INSERT INTO expiryctl.dead_letter_due_tallies (due_hour, reason_category, letters)
SELECT date_trunc('hour', due_at, 'UTC'), reason_category, count(*)
  FROM expiryctl.dead_letter_states
 WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
 GROUP BY 1, 2;
COMMENT ON TABLE expiryctl.dead_letter_due_tallies IS
    'Waiting letters (dead or in_request) per UTC hour of due_at and reason category, kept by dead_letter_states'' statement triggers.';
-- The summary reads each category's earliest deadline, and the lateness
-- ranks of the categories a retry can fix, from this index: with the
-- category in it, the reads stay index-only.
DROP INDEX expiryctl.dead_letter_states_waiting_due;
CREATE INDEX dead_letter_states_waiting_due ON expiryctl.dead_letter_states (due_at) INCLUDE (reason_category)
    WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
LOCK TABLE expiryctl.dead_letter_due_tallies IN ACCESS EXCLUSIVE MODE;
DELETE FROM expiryctl.dead_letter_due_tallies;
ALTER TABLE expiryctl.dead_letter_due_tallies
    DROP CONSTRAINT dead_letter_due_tallies_pkey,
    DROP COLUMN reason_category,
    ADD CONSTRAINT dead_letter_due_tallies_pkey PRIMARY KEY (due_hour);
INSERT INTO expiryctl.dead_letter_due_tallies (due_hour, letters)
SELECT date_trunc('hour', due_at, 'UTC'), count(*)
  FROM expiryctl.dead_letter_states
 WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
 GROUP BY 1;
COMMENT ON TABLE expiryctl.dead_letter_due_tallies IS
    'Waiting letters (dead or in_request) per UTC hour of due_at, kept by dead_letter_states'' statement triggers.';
DROP INDEX expiryctl.dead_letter_states_waiting_due;
CREATE INDEX dead_letter_states_waiting_due ON expiryctl.dead_letter_states (due_at)
    WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL;
