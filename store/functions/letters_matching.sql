-- letters_matching is the letters a request's selection (its filter, as
-- replay's Filter encodes it) matches: dead, not redacted, and within
-- the reasons, queue, time range and search text it names. The search is
-- a substring match with the LIKE wildcards of the text escaped.
CREATE OR REPLACE FUNCTION expiryctl.letters_matching(f jsonb) RETURNS SETOF expiryctl.dead_letters
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT d.* FROM expiryctl.dead_letters d
      JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id
     WHERE s.status = 'dead' AND d.redacted_at IS NULL
       AND (f->'reason' IS NULL OR jsonb_array_length(f->'reason') = 0
            OR d.reason_category IN (SELECT jsonb_array_elements_text(f->'reason')))
       AND (coalesce(f->>'queue', '') = '' OR d.source_queue = f->>'queue')
       AND (coalesce(f->>'status', '') = '' OR s.status = f->>'status')
       AND (f->>'since' IS NULL OR d.dead_lettered_at >= (f->>'since')::timestamptz)
       AND (f->>'until' IS NULL OR d.dead_lettered_at < (f->>'until')::timestamptz)
       AND (coalesce(f->>'search', '') = '' OR (
            SELECT d.reservation_id ILIKE p OR d.message_id ILIKE p OR d.idempotency_key ILIKE p
                OR d.error_class ILIKE p OR d.last_error ILIKE p
              FROM (SELECT '%' || replace(replace(replace(f->>'search', '\', '\\'), '%', '\%'), '_', '\_') || '%' AS p) s))
$$;

REVOKE ALL ON FUNCTION expiryctl.letters_matching(f jsonb) FROM PUBLIC;
