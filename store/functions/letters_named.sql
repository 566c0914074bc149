-- letters_named is how a refusal names the letters it refuses, each id as
-- the caller wrote it ("333", or "333 (replayed)"): "dead letter 333" or
-- "dead letters 333, 334", then verb in the number that agrees with it
-- ("was" or "were"), or none when the verbs are empty.
CREATE OR REPLACE FUNCTION expiryctl.letters_named(ids text[], verb_one text, verb_many text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT rtrim(CASE WHEN cardinality(ids) = 1 THEN 'dead letter ' || ids[1] || ' ' || verb_one
                      ELSE 'dead letters ' || array_to_string(ids, ', ') || ' ' || verb_many END)
$$;

REVOKE ALL ON FUNCTION expiryctl.letters_named(ids text[], verb_one text, verb_many text) FROM PUBLIC;
