-- +goose Up
-- The gap at its source (issue 32). The archive's overdue letters count
-- only the jobs that reached a dead-letter queue and were captured: a job
-- lost before the DLQ, or acked before its commit, leaves a hold past its
-- deadline that no letter speaks for. gap_query, run read-only against the
-- reservation database (--outcome-url), counts the holds past their
-- deadline there, so that `dlq summary`, the terminal UI and the metrics
-- show them beside the archive's overdue letters and the alert pages on
-- them. It is a policy key like the others: set by one admin, approved by
-- a second (policy_apply names the keys).
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.policy ADD COLUMN gap_query text NOT NULL DEFAULT '';

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.policy DROP COLUMN gap_query;
