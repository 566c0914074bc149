-- replay_requests_handler_frozen keeps what replay_request_create set of a
-- request's handler and permanent-letter flags as it set them, whoever
-- updates the row; replay_request_guard freezes the other columns.
CREATE OR REPLACE FUNCTION expiryctl.replay_requests_handler_frozen() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('frozen-request', format(
        'replay request %s is frozen: --same-handler-ok, its reason, --include-permanent and the versions and targets of its cohort are set when it is requested and never change; make a new request',
        OLD.id));
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.replay_requests_handler_frozen() FROM PUBLIC;
