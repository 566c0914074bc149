-- handler_version_of reads x-handler-version from headers as the archive
-- encodes them (deadletter.EncodeHeaders): a string as it is, a byte array
-- or a string that is not UTF-8 escaped; "" when there is none.
CREATE OR REPLACE FUNCTION expiryctl.handler_version_of(headers jsonb) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT left(CASE jsonb_typeof(headers->'x-handler-version')
        WHEN 'string' THEN headers->>'x-handler-version'
        WHEN 'object' THEN coalesce(encode(decode(coalesce(headers->'x-handler-version'->>'$bytes',
                                                           headers->'x-handler-version'->>'$string'), 'base64'), 'escape'), '')
        ELSE '' END, 200)
$$;

REVOKE ALL ON FUNCTION expiryctl.handler_version_of(headers jsonb) FROM PUBLIC;
