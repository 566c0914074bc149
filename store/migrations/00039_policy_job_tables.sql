-- +goose Up
-- A team's own jobs table (issue 34) is read and written only through a
-- mapping of its columns and states, which one admin proposes and another
-- approves, as every policy key (policy_apply names the keys). The
-- mappings are kept by the queue name letters carry,
-- jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE; capture and replay of a
-- table without an approved mapping are refused.
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.policy ADD COLUMN job_tables jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT policy_job_tables_by_name CHECK (jsonb_typeof(job_tables) = 'object');

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
ALTER TABLE expiryctl.policy DROP COLUMN job_tables;
