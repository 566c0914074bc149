-- +goose Up
-- The audit chain and a request's runner were serialised by advisory locks,
-- whose keys any login that can connect may take: one in no group holding
-- the chain's key stalled every audited command, and one holding a
-- request's key (its id) blocked its run. These two tables are locked and
-- written only by the schema's functions (no group holds a privilege on
-- them), so nobody outside the API can take what they guard.
SET LOCAL search_path TO pg_catalog, pg_temp;

-- audit_chain is locked, never written: audit_next_seq and its siblings
-- take it IN EXCLUSIVE MODE for the rest of the transaction that appends,
-- which a login needs UPDATE, DELETE or TRUNCATE on it to take.
CREATE TABLE expiryctl.audit_chain ();
COMMENT ON TABLE expiryctl.audit_chain IS 'Locked (never written) by the functions that append to audit_log, so that rows are numbered and chained one transaction at a time.';

-- A request's runner holds its lease while the session it took it in
-- stands: the pid and login are the lock session's, and a lease whose
-- session is gone is free.
CREATE TABLE expiryctl.replay_runner_leases (
    request_id bigint PRIMARY KEY REFERENCES expiryctl.replay_requests (id),
    pid integer NOT NULL,
    login name NOT NULL,
    application text NOT NULL DEFAULT '',
    taken_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE expiryctl.replay_runner_leases IS 'Who runs each request: the session (pid, login) that took the lease through replay_run_acquire; written only by the schema''s functions.';
-- Who runs what is no secret: `replay run` names the holder it waits on.
-- SELECT neither locks a row nor conflicts with a writer.
GRANT SELECT ON expiryctl.replay_runner_leases TO expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP TABLE expiryctl.replay_runner_leases;
DROP TABLE expiryctl.audit_chain;
