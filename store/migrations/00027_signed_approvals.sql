-- +goose Up
-- An approval signed by the approver's own key (issue 31): the signed
-- statement of what was approved, a signed note, kept with the request so
-- that a runner can check it against a keyring it holds outside the
-- database. replay_review writes it; a superuser can write it too, but not
-- sign one.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.replay_requests ADD COLUMN approval_note text;
COMMENT ON COLUMN expiryctl.replay_requests.approval_note IS 'The approver''s signed statement of what they approved (a signed note), or NULL for an unsigned approval.';

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.replay_requests DROP COLUMN approval_note;
