-- audit_refuse_forged is the trigger behind audit_log_who_and_when: the
-- database, not the client, says who and when. The condition is plain
-- SQL, so the refusing function (PL/pgSQL) is only loaded for a row that
-- names another role or a time outside its own statement.
CREATE OR REPLACE FUNCTION expiryctl.audit_refuse_forged() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.audit_log: db_role and at are set by the database; leave them out of the INSERT'
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('db_role %L (session_user is %L), at %s', NEW.db_role, session_user, NEW.at);
END
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_refuse_forged() FROM PUBLIC;
