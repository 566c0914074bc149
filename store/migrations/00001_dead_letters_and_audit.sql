-- The archive of dead letters and the audit trail every command writes to.

-- +goose Up
CREATE TABLE expiryctl.dead_letters (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- sha256 over what makes one dead-lettering unique; a redelivered or
    -- duplicated copy of the same DLQ message hashes the same and is skipped.
    fingerprint          bytea       NOT NULL UNIQUE,
    -- idempotency key, else message id: the job across its incarnations.
    job_key              text,
    message_id           text,
    reservation_id       text,
    idempotency_key      text,
    expected_version     bigint,
    due_at               timestamptz,
    source_queue         text        NOT NULL,
    origin_queue         text,
    original_exchange    text,
    original_routing_key text,
    reason_category      text        NOT NULL CHECK (reason_category IN (
        'transient-exhausted', 'validation', 'not-found', 'conflict',
        'malformed', 'broker-expired', 'broker-limit', 'unknown')),
    error_class          text,
    last_error           text,
    attempts             integer     NOT NULL DEFAULT 0,
    attempt_history      jsonb       NOT NULL DEFAULT '[]',
    headers              jsonb       NOT NULL DEFAULT '{}',
    content_type         text,
    payload              bytea       NOT NULL,
    payload_sha256       bytea       NOT NULL,
    payload_size         integer     NOT NULL,
    dead_lettered_at     timestamptz NOT NULL,
    ingested_at          timestamptz NOT NULL DEFAULT now(),
    status               text        NOT NULL DEFAULT 'dead' CHECK (status IN (
        'dead', 'in_request', 'replayed', 'discarded')),
    previous_id          bigint REFERENCES expiryctl.dead_letters (id),
    replay_request_id    bigint,
    replay_count         integer     NOT NULL DEFAULT 0,
    redacted_at          timestamptz
);

COMMENT ON TABLE expiryctl.dead_letters IS
    'One row per dead-lettering of a reservation-expiry job, captured from a DLQ by expiryctl dlq ingest.';

-- Keyset pagination: newest first, ties broken by id.
CREATE INDEX dead_letters_newest ON expiryctl.dead_letters (dead_lettered_at DESC, id DESC);
CREATE INDEX dead_letters_category_newest
    ON expiryctl.dead_letters (reason_category, dead_lettered_at DESC, id DESC);
CREATE INDEX dead_letters_job ON expiryctl.dead_letters (job_key, id DESC);
-- The oldest letter still waiting for a decision, per category, without a scan.
CREATE INDEX dead_letters_outstanding_oldest
    ON expiryctl.dead_letters (reason_category, dead_lettered_at)
    WHERE status IN ('dead', 'in_request');

-- Counts per category, queue and status kept by statement triggers, so that the
-- triage summary costs the same on a million letters as on a thousand.
CREATE TABLE expiryctl.dead_letter_tallies (
    reason_category text   NOT NULL,
    source_queue    text   NOT NULL,
    status          text   NOT NULL,
    letters         bigint NOT NULL,
    PRIMARY KEY (reason_category, source_queue, status)
);

-- +goose StatementBegin
CREATE FUNCTION expiryctl.tally_dead_letters() RETURNS trigger
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
-- +goose StatementEnd

CREATE TRIGGER dead_letters_tally_insert AFTER INSERT ON expiryctl.dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letters_tally_update AFTER UPDATE ON expiryctl.dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();
CREATE TRIGGER dead_letters_tally_delete AFTER DELETE ON expiryctl.dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();

CREATE TABLE expiryctl.audit_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor     text        NOT NULL,
    db_role   text        NOT NULL DEFAULT session_user,
    action    text        NOT NULL,
    target    text        NOT NULL DEFAULT '',
    details   jsonb       NOT NULL DEFAULT '{}',
    outcome   text        NOT NULL
);

COMMENT ON TABLE expiryctl.audit_log IS
    'Every expiryctl action, reads included: who, as which database role, did what to which target, and how it ended.';

CREATE INDEX audit_log_at ON expiryctl.audit_log (at DESC, id DESC);

-- +goose Down
DROP TABLE expiryctl.audit_log;
DROP TABLE expiryctl.dead_letters;
DROP TABLE expiryctl.dead_letter_tallies;
DROP FUNCTION expiryctl.tally_dead_letters();
