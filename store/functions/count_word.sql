-- count_word is the word for n of a thing, as a refusal message says it:
-- one for 1, many for every other count ("1 letter", "3 letters").
CREATE OR REPLACE FUNCTION expiryctl.count_word(n bigint, one text, many text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN n = 1 THEN one ELSE many END
$$;

REVOKE ALL ON FUNCTION expiryctl.count_word(n bigint, one text, many text) FROM PUBLIC;
