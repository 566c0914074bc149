-- refuse_text raises like replay_refuse; it returns text so that a plain
-- SQL function can call it in a CASE branch (PL/pgSQL then loads only when
-- something is refused).
CREATE OR REPLACE FUNCTION expiryctl.refuse_text(rule text, message text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;

REVOKE ALL ON FUNCTION expiryctl.refuse_text(rule text, message text) FROM PUBLIC;
