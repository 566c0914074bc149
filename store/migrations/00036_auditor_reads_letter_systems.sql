-- +goose Up
-- An auditor reads which system each letter of a request came from, and
-- that system's own attributes of it (SQS's message id, receive count,
-- times), as it reads the AMQP properties (00023): `replay show` names the
-- system of a request's targets and leaves out what does not apply to it.
SET LOCAL search_path TO pg_catalog, pg_temp;

GRANT SELECT (source_system, native) ON expiryctl.dead_letters TO expiryctl_auditor;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
REVOKE SELECT (source_system, native) ON expiryctl.dead_letters FROM expiryctl_auditor;
