-- +goose Up
-- An auditor reads what an approver was shown of a request (`replay show`,
-- `replay list`): its letters' identity, reasons, targets and states, never
-- their payloads or headers, which stay the operators' and approvers'.
-- A column grant, so a query of the auditor's that names payload or
-- headers, or asks for *, is refused.
SET LOCAL search_path TO pg_catalog, pg_temp;

GRANT SELECT (id, fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
              source_queue, origin_queue, original_exchange, original_routing_key, reason_category, error_class,
              last_error, attempts, attempt_history, content_type, payload_sha256, payload_size, dead_lettered_at,
              ingested_at, previous_id, replay_request_id, replay_count, redacted_at, properties)
    ON expiryctl.dead_letters TO expiryctl_auditor;
GRANT SELECT ON expiryctl.dead_letter_states TO expiryctl_auditor;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
REVOKE SELECT ON expiryctl.dead_letter_states FROM expiryctl_auditor;
REVOKE SELECT (id, fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
               source_queue, origin_queue, original_exchange, original_routing_key, reason_category, error_class,
               last_error, attempts, attempt_history, content_type, payload_sha256, payload_size, dead_lettered_at,
               ingested_at, previous_id, replay_request_id, replay_count, redacted_at, properties)
    ON expiryctl.dead_letters FROM expiryctl_auditor;
