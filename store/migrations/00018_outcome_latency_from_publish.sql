-- +goose Up
-- An outcome's latency runs from the publish, not from the broker's
-- confirm: a worker may commit before the confirm reaches the runner, which
-- made the p50 latency 0. 00014 shipped measuring it from the confirm; a
-- stored generated column cannot change its expression in PostgreSQL 15,
-- so it is made anew, computed again for the rows already there.
ALTER TABLE expiryctl.replay_outcomes DROP COLUMN latency;
ALTER TABLE expiryctl.replay_outcomes
    ADD COLUMN latency interval GENERATED ALWAYS AS (greatest(terminal_at - published_at, interval '0')) STORED;

-- +goose Down
ALTER TABLE expiryctl.replay_outcomes DROP COLUMN latency;
ALTER TABLE expiryctl.replay_outcomes
    ADD COLUMN latency interval GENERATED ALWAYS AS (greatest(terminal_at - confirmed_at, interval '0')) STORED;
