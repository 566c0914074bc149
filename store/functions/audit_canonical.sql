-- audit_canonical is the byte string a row's hash covers; docs/audit.md
-- specifies it for independent verifiers. Every field is length-prefixed
-- (4-byte big-endian byte count, then UTF-8), numbers are 8-byte big-endian,
-- and the time is microseconds since the Unix epoch, so no session setting
-- (TimeZone, DateStyle, extra_float_digits) can change it.
CREATE OR REPLACE FUNCTION expiryctl.audit_canonical(
    seq bigint, at timestamptz, actor text, db_role text, action text,
    target text, details jsonb, outcome text, prev_hash bytea
) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT int8send(seq)
        || int8send((extract(epoch FROM at) * 1000000)::bigint)
        || int4send(octet_length(convert_to(actor, 'UTF8')))   || convert_to(actor, 'UTF8')
        || int4send(octet_length(convert_to(db_role, 'UTF8'))) || convert_to(db_role, 'UTF8')
        || int4send(octet_length(convert_to(action, 'UTF8')))  || convert_to(action, 'UTF8')
        || int4send(octet_length(convert_to(target, 'UTF8')))  || convert_to(target, 'UTF8')
        || int4send(octet_length(convert_to(details::text, 'UTF8'))) || convert_to(details::text, 'UTF8')
        || int4send(octet_length(convert_to(outcome, 'UTF8'))) || convert_to(outcome, 'UTF8')
        || prev_hash
$$;

REVOKE ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin;
