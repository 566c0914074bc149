-- +goose Up
-- The policy may require every runner to check signed approvals (issue 31).
-- A runner with a keyring requires them whatever this says: it is a row a
-- superuser can write, so it only ever adds to the runner's own rule.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.policy ADD COLUMN signed_approvals boolean NOT NULL DEFAULT false;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.policy DROP COLUMN signed_approvals;
