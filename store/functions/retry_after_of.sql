-- retry_after_of is when a letter's last error said to try again, from
-- the x-retry-after header (the reference worker's, whole seconds) or a
-- Retry-After one (an HTTP service's: seconds or an HTTP date), as the
-- archive encodes headers (deadletter.EncodeHeaders); seconds count from
-- at, when the letter was dead-lettered. NULL when the letter carries
-- none; 'infinity' when its value is neither, so that a request refuses it
-- by name rather than guess.
CREATE OR REPLACE FUNCTION expiryctl.retry_after_of(headers jsonb, at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v jsonb := coalesce(headers->'x-retry-after', headers->'retry-after', headers->'Retry-After');
    t text;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    -- A narrow integer is tagged ({"$int32": 30}); a string that is not
    -- UTF-8 is tagged too, and is no number or date.
    IF jsonb_typeof(v) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(v)) = 1
       AND jsonb_typeof(v->(SELECT k FROM jsonb_object_keys(v) k)) = 'number' THEN
        v := v->(SELECT k FROM jsonb_object_keys(v) k);
    END IF;
    t := btrim(CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'number' THEN v::text ELSE '' END);
    IF t ~ '^[0-9]{1,9}$' THEN
        RETURN at + make_interval(secs => t::integer);
    END IF;
    IF t ~ '^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$' THEN
        BEGIN
            RETURN to_timestamp(substr(t, 6, 20), 'DD Mon YYYY HH24:MI:SS')::timestamp AT TIME ZONE 'UTC';
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            RETURN 'infinity';
        END;
    END IF;
    RETURN 'infinity';
END
$$;

REVOKE ALL ON FUNCTION expiryctl.retry_after_of(headers jsonb, at timestamptz) FROM PUBLIC;
