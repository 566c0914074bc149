-- not_found raises "no such object" (SQLSTATE EG002, the detail kind:id)
-- for expiryctl to name it, with the command that lists the ones there are.
CREATE OR REPLACE FUNCTION expiryctl.not_found(kind text, id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', CASE kind
            WHEN 'dead_letter' THEN format('dead letter %s not found: `expiryctl dlq list` shows the ids there are', id)
            WHEN 'replay_request' THEN format('replay request %s not found: `expiryctl replay list` shows the requests there are', id)
            WHEN 'policy_change' THEN format('policy change %s not found: `expiryctl policy show` lists the pending ones', id)
            ELSE format('%s %s not found', kind, id) END
        USING ERRCODE = 'EG002', DETAIL = kind || ':' || id;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.not_found(kind text, id bigint) FROM PUBLIC;
