-- schema.sql: the schema "expiryctl" as `expiryctl migrate` (migrations up to
-- 00044, then the files of store/functions/) leaves an empty database, dumped
-- by pg_dump --schema-only from PostgreSQL 15. Generated: do not edit. After a
-- new migration or a change to a function's file, regenerate it with
-- `make schema`; TestSchemaIsCurrent fails while it is stale. To read or
-- change one function, open its file: store/functions/NAME.sql.
--
-- How to read it:
--   * Every object is owned by the role that ran `expiryctl migrate` (the
--     schema's owner, not a superuser), named expiryctl_owner here. SECURITY
--     DEFINER functions run as it: that is how the groups write through them.
--   * The privileges (GRANT and REVOKE, after all the objects) are the
--     governance rules: no group holds INSERT, UPDATE, DELETE or TRUNCATE on a
--     table, and a function is executable only by the groups granted it.
--   * The groups are cluster-wide roles, listed at the end with the owner's
--     default privileges in the database.
--   * goose's version table (expiryctl.schema_version) is left out.
--

--
-- Name: expiryctl; Type: SCHEMA; Schema: -
--

CREATE SCHEMA expiryctl;


--
-- Name: access_change(text, text, text[], boolean); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.access_change(actor text, login text, groups text[], grant_it boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    g text;
    r record;
BEGIN
    IF NOT expiryctl.caller_is_owner() THEN
        PERFORM expiryctl.replay_refuse('owner-only', format(
            'only the schema owner manages access, and the login %s is not it', session_user));
    END IF;
    label := expiryctl.actor_label(actor);
    SELECT rolcanlogin, rolsuper INTO r FROM pg_roles WHERE rolname = login;
    IF NOT FOUND THEN
        PERFORM expiryctl.replay_refuse('login', format('there is no role %L: create the login first (CREATE ROLE %I LOGIN)', login, login));
    END IF;
    IF NOT r.rolcanlogin THEN
        PERFORM expiryctl.replay_refuse('login', format('%s is not a login role: grant groups to per-person logins', login));
    END IF;
    IF coalesce(cardinality(groups), 0) = 0 THEN
        PERFORM expiryctl.replay_refuse('groups', 'name at least one group: expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin');
    END IF;
    FOREACH g IN ARRAY groups LOOP
        IF g NOT IN ('expiryctl_ingester', 'expiryctl_operator', 'expiryctl_approver', 'expiryctl_auditor', 'expiryctl_admin') THEN
            PERFORM expiryctl.replay_refuse('groups', format(
                'unknown group %L: the groups are expiryctl_ingester, expiryctl_operator, expiryctl_approver, expiryctl_auditor, expiryctl_admin', g));
        END IF;
        IF grant_it THEN
            EXECUTE format('GRANT %I TO %I', g, login);
        ELSE
            EXECUTE format('REVOKE %I FROM %I', g, login);
        END IF;
    END LOOP;
    PERFORM expiryctl.audit_write(label, CASE WHEN grant_it THEN 'access.grant' ELSE 'access.revoke' END,
        'login:' || login, jsonb_build_object('login', login, 'groups', to_jsonb(groups), 'superuser', r.rolsuper));
END
$$;


--
-- Name: access_granted(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.access_granted() RETURNS TABLE(login text, group_name text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT latest.login, latest.group_name
      FROM (SELECT DISTINCT ON (l.details->>'login', g.name)
                   l.details->>'login' AS login, g.name AS group_name, l.action
              FROM expiryctl.audit_log l
             CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(l.details->'groups') = 'array'
                                                               THEN l.details->'groups' ELSE '[]' END) AS g(name)
             WHERE l.action IN ('access.grant', 'access.revoke') AND l.outcome = 'ok'
             ORDER BY l.details->>'login', g.name, l.seq DESC) latest
     WHERE latest.action = 'access.grant' AND latest.login IS NOT NULL
$$;


--
-- Name: actor_label(text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.actor_label(declared text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT CASE
        WHEN coalesce(btrim(declared), '') = '' THEN session_user::text
        WHEN declared = session_user THEN declared
        WHEN (SELECT identity_mode FROM expiryctl.policy WHERE singleton) = 'declared' THEN declared
        ELSE expiryctl.refuse_text('identity-db-role', format(
            'policy identity_mode is db-role: you act as the database role %s, and the label %s differs; drop --actor/EXPIRYCTL_ACTOR (or set it to %s)',
            session_user, declared, session_user))
    END
$$;


--
-- Name: audit_append(text, text, text, jsonb, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) RETURNS TABLE(seq bigint, hash text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    SELECT CASE
               WHEN coalesce(btrim(actor), '') = '' THEN session_user::text
               WHEN actor = session_user THEN actor
               ELSE expiryctl.actor_label(actor)
           END,
           CASE
               WHEN action IN ('dlq.summary', 'dlq.list', 'dlq.show', 'dlq.ingest', 'dlq.purge', 'replay.show', 'replay.list',
                    'replay.plan', 'replay.dry_run', 'replay.run.failover', 'policy.show', 'access.list', 'audit.list',
                    'audit.verify', 'audit.export', 'audit.reconcile', 'metrics.serve', 'tui.open', 'demo.run',
                    'schema.migrate', 'schema.migrate.down')
                    AND outcome IN ('ok', 'refused', 'error')
                   THEN action
               WHEN action IN ('replay.request', 'replay.approve', 'replay.reject', 'replay.cancel', 'replay.expire',
                    'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled', 'replay.halt', 'replay.canary.start',
                    'replay.canary.pass', 'replay.complete', 'policy.set', 'policy.propose', 'policy.approve', 'policy.reject',
                    'access.grant', 'access.revoke', 'dlq.ingest.batch', 'dlq.purge.batch', 'audit.checkpoint',
                    'migrate.governance', 'replay.run')
                    AND outcome IN ('refused', 'error')
                   THEN action
               WHEN lower(regexp_replace(action, '\s', '', 'g')) IN ('replay.request', 'replay.approve', 'replay.reject',
                    'replay.cancel', 'replay.expire', 'replay.run.start', 'replay.run.interrupted', 'replay.run.cancelled',
                    'replay.halt', 'replay.canary.start', 'replay.canary.pass', 'replay.complete', 'policy.set',
                    'policy.propose', 'policy.approve', 'policy.reject', 'access.grant', 'access.revoke', 'dlq.ingest.batch',
                    'dlq.purge.batch', 'audit.checkpoint', 'migrate.governance')
                   THEN expiryctl.refuse_text('audit-reserved', format(
                       'an %L %L row is written only by the database function that makes the change, in the same transaction; a client records only its refusals and failures, as outcome ''refused'' or ''error''',
                       outcome, action))
               WHEN outcome NOT IN ('ok', 'refused', 'error')
                   THEN expiryctl.refuse_text('audit-outcome', format(
                       'outcome %L is not one of ok, refused, error', outcome))
               ELSE expiryctl.refuse_text('audit-action', format(
                   'action %L is not one a client records: the trail takes the actions of docs/audit.md, spelt exactly', action))
           END,
           coalesce(target, ''), (coalesce(details, '{}') - 'build') || expiryctl.audit_build(), outcome
    RETURNING audit_log.seq, encode(audit_log.hash, 'hex')
$$;


--
-- Name: audit_build(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_build() RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT CASE
        WHEN coalesce(current_setting('expiryctl.build', true), '') = '' THEN '{}'::jsonb
        ELSE jsonb_build_object('build', left(current_setting('expiryctl.build', true), 200))
    END
$$;


--
-- Name: audit_canonical(bigint, timestamp with time zone, text, text, text, text, jsonb, text, bytea); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT
    AS $$
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


--
-- Name: audit_checkpoint_record(text, bigint, bytea, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    stored bigint;
    origin text;
    lines text[];
    body int := 3;
    counted bigint;
    counts_root bytea;
    id bigint;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor');
    label := expiryctl.actor_label(actor);
    SELECT t.tree_size, t.origin INTO stored, origin FROM expiryctl.audit_trail t WHERE t.singleton;
    IF tree_size > stored THEN
        PERFORM expiryctl.replay_refuse('tree-size', format(
            'a checkpoint of %s rows needs them in the tree, which holds %s', tree_size, stored));
    END IF;
    IF root_hash IS DISTINCT FROM expiryctl.audit_tree_root(tree_size) THEN
        PERFORM expiryctl.replay_refuse('checkpoint-note', format(
            'the root hash %s is not the root of the audit tree''s first %s rows as the database computes it',
            encode(root_hash, 'hex'), tree_size));
    END IF;
    lines := string_to_array(signed_note, E'\n');
    IF left(lines[4], 7) = 'counts ' THEN
        body := 4;
        SELECT t.counts_size INTO counted FROM expiryctl.audit_trail t WHERE t.singleton;
        SELECT c.hash INTO counts_root FROM expiryctl.audit_count_tree c WHERE c.level = 16 AND c.n = 0;
        IF counted IS DISTINCT FROM tree_size OR lines[4] IS DISTINCT FROM 'counts 65536 ' || encode(counts_root, 'base64') THEN
            PERFORM expiryctl.replay_refuse('checkpoint-note', format(
                'the note''s count tree line %L is not the count tree the database computes from the first %s rows (it counts %s rows, root %s): the signer counted other rows',
                lines[4], tree_size, counted, encode(counts_root, 'base64')));
        END IF;
    END IF;
    IF cardinality(lines) < body + 3 OR lines[1] IS DISTINCT FROM origin OR lines[2] IS DISTINCT FROM tree_size::text
       OR lines[3] IS DISTINCT FROM encode(root_hash, 'base64') OR lines[body + 1] <> ''
       OR left(lines[body + 2], 2) <> E'\u2014 ' THEN
        PERFORM expiryctl.replay_refuse('checkpoint-note', format(
            'the note is not a signed checkpoint of this trail (%s) at %s rows with that root: it must be the text `audit checkpoint` signs, then a signature line',
            origin, tree_size));
    END IF;
    INSERT INTO expiryctl.audit_checkpoints (tree_size, root_hash, signed_note)
    VALUES (tree_size, root_hash, signed_note) RETURNING audit_checkpoints.id INTO id;
    PERFORM expiryctl.audit_write(label, 'audit.checkpoint', 'audit_checkpoint:' || id, jsonb_build_object(
        'tree_size', tree_size, 'root_hash', encode(root_hash, 'hex')));
    RETURN id;
END
$$;


--
-- Name: audit_count_bucket(text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_count_bucket(field text, value text) RETURNS integer
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CAST(CAST('x' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.substring(
        pg_catalog.sha256(expiryctl.audit_count_key(field, value)), 1, 2), 'hex') AS pg_catalog.bit(16)) AS pg_catalog.int4)
$$;


--
-- Name: audit_count_key(text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_count_key(field text, value text) RETURNS bytea
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT pg_catalog.int4send(pg_catalog.octet_length(field)) OPERATOR(pg_catalog.||) pg_catalog.convert_to(field, 'UTF8')
        OPERATOR(pg_catalog.||) pg_catalog.int4send(pg_catalog.octet_length(value)) OPERATOR(pg_catalog.||) pg_catalog.convert_to(value, 'UTF8')
$$;


--
-- Name: audit_counts_extend(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_counts_extend(new_size bigint) RETURNS bytea
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    old_size bigint;
    present bigint;
    touched integer[];
    lvl integer;
    empty bytea := sha256('\x00'::bytea);
    root bytea;
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor');
    SELECT t.counts_size INTO old_size FROM expiryctl.audit_trail t WHERE t.singleton FOR UPDATE;
    IF new_size < old_size THEN
        PERFORM expiryctl.replay_refuse('counts-moved', format(
            'the count tree counts %s rows, more than the %s asked for: another signer counted further; read it again', old_size, new_size));
    END IF;
    SELECT count(*) INTO present FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size;
    IF present <> new_size - old_size THEN
        RAISE EXCEPTION 'the trail has % rows from seq % to seq %, not %: `expiryctl audit verify` says what changed',
            present, old_size + 1, new_size, new_size - old_size;
    END IF;
    WITH counted AS (
        SELECT 'action' AS field, l.action AS value, count(*) AS n, max(l.seq) AS newest
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.action
        UNION ALL
        SELECT 'actor', l.actor, count(*), max(l.seq)
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.actor
        UNION ALL
        SELECT 'target', l.target, count(*), max(l.seq)
          FROM expiryctl.audit_log l WHERE l.seq > old_size AND l.seq <= new_size GROUP BY l.target
    ), grown AS (
        INSERT INTO expiryctl.audit_count_leaves AS c (field, value, bucket, rows, newest)
        SELECT counted.field, counted.value, expiryctl.audit_count_bucket(counted.field, counted.value), counted.n, counted.newest
          FROM counted
        ON CONFLICT (field, value) DO UPDATE SET rows = c.rows + excluded.rows, newest = greatest(c.newest, excluded.newest)
        RETURNING c.bucket
    )
    SELECT coalesce(array_agg(DISTINCT grown.bucket), '{}') INTO touched FROM grown;

    INSERT INTO expiryctl.audit_count_tree AS t (level, n, hash)
    SELECT 0, c.bucket, sha256('\x00'::bytea || string_agg(
               expiryctl.audit_count_key(c.field, c.value) || int8send(c.rows) || int8send(c.newest), ''::bytea
               ORDER BY convert_to(c.field, 'UTF8'), convert_to(c.value, 'UTF8')))
      FROM expiryctl.audit_count_leaves c WHERE c.bucket = ANY (touched) GROUP BY c.bucket
    ON CONFLICT (level, n) DO UPDATE SET hash = excluded.hash;
    FOR lvl IN 1..16 LOOP
        SELECT coalesce(array_agg(DISTINCT b >> 1), '{}') INTO touched FROM unnest(touched) AS b;
        INSERT INTO expiryctl.audit_count_tree AS t (level, n, hash)
        SELECT lvl, p, sha256('\x01'::bytea || coalesce(l.hash, empty) || coalesce(r.hash, empty))
          FROM unnest(touched) AS p
          LEFT JOIN expiryctl.audit_count_tree l ON l.level = lvl - 1 AND l.n = 2 * p
          LEFT JOIN expiryctl.audit_count_tree r ON r.level = lvl - 1 AND r.n = 2 * p + 1
        ON CONFLICT (level, n) DO UPDATE SET hash = excluded.hash;
        empty := sha256('\x01'::bytea || empty || empty);
    END LOOP;
    UPDATE expiryctl.audit_trail SET counts_size = new_size WHERE singleton;
    SELECT t.hash INTO root FROM expiryctl.audit_count_tree t WHERE t.level = 16 AND t.n = 0;
    RETURN coalesce(root, empty);
END
$$;


--
-- Name: audit_next_at(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_next_at() RETURNS timestamp with time zone
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '30s'
    AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT clock_timestamp();
$$;


--
-- Name: audit_next_prev_hash(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_next_prev_hash() RETURNS bytea
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '30s'
    AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT coalesce((SELECT hash FROM expiryctl.audit_log ORDER BY seq DESC LIMIT 1),
                    '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
$$;


--
-- Name: audit_next_seq(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_next_seq() RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '30s'
    AS $$
    LOCK TABLE expiryctl.audit_chain IN EXCLUSIVE MODE;
    SELECT coalesce(max(seq), 0) + 1 FROM expiryctl.audit_log;
$$;


--
-- Name: audit_refuse_change(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows can be added, never changed or removed';
END
$$;


--
-- Name: audit_refuse_forged(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_refuse_forged() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'expiryctl.audit_log: db_role and at are set by the database; leave them out of the INSERT'
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('db_role %L (session_user is %L), at %s', NEW.db_role, session_user, NEW.at);
END
$$;


--
-- Name: audit_tree_extend(bigint, integer); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    current_size bigint;
    size bigint;
    r record;
    k bigint;
    lvl integer;
    h bytea;
    sibling bytea;
    first_idx bigint;
    sibling_idx bigint;
    pending bytea[] := '{}';
BEGIN
    PERFORM expiryctl.require_role('audit checkpoint', 'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    SELECT tree_size INTO current_size FROM expiryctl.audit_trail WHERE singleton FOR UPDATE;
    IF old_size <> current_size THEN
        PERFORM expiryctl.replay_refuse('tree-moved', format(
            'the audit tree holds %s rows, not %s: another process extended it; read it again', current_size, old_size));
    END IF;
    size := old_size;
    -- The batch's hashes are kept in pending (pending[i] is stored hash
    -- first_idx + i - 1) and written in one statement at the end; a
    -- sibling below first_idx is read from the table.
    first_idx := 2 * old_size - bit_count(old_size::bit(64));
    FOR r IN SELECT seq, hash FROM expiryctl.audit_log WHERE seq > old_size ORDER BY seq LIMIT greatest(batch, 1) LOOP
        IF r.seq <> size + 1 THEN
            RAISE EXCEPTION 'the trail has seq % where seq % belongs: `expiryctl audit verify` says what changed', r.seq, size + 1;
        END IF;
        h := sha256('\x00'::bytea || r.hash);
        pending := pending || h;
        k := size;
        lvl := 0;
        WHILE k & 1 = 1 LOOP
            -- The left sibling: the subtree (lvl, k - 1), at tlog's
            -- StoredHashIndex = 2m - popcount(m) + lvl, m = (k << lvl) - 1.
            sibling_idx := 2 * ((k << lvl) - 1) - bit_count(((k << lvl) - 1)::bit(64)) + lvl;
            IF sibling_idx >= first_idx THEN
                sibling := pending[sibling_idx - first_idx + 1];
            ELSE
                SELECT t.hash INTO STRICT sibling FROM expiryctl.audit_tree t WHERE t.idx = sibling_idx;
            END IF;
            h := sha256('\x01'::bytea || sibling || h);
            pending := pending || h;
            k := k >> 1;
            lvl := lvl + 1;
        END LOOP;
        size := size + 1;
    END LOOP;
    INSERT INTO expiryctl.audit_tree (idx, hash)
    SELECT first_idx + p.ord - 1, p.hash FROM unnest(pending) WITH ORDINALITY AS p(hash, ord);
    IF size > old_size THEN
        UPDATE expiryctl.audit_trail SET tree_size = size,
               origin = coalesce(origin, 'expiryctl audit trail ' || gen_random_uuid()) WHERE singleton;
    END IF;
    RETURN size;
END
$$;


--
-- Name: audit_tree_root(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_tree_root(size bigint) RETURNS bytea
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    subtrees bytea[] := '{}';
    start bigint := 0;
    lvl integer;
    m bigint;
    h bytea;
    root bytea;
    i integer;
BEGIN
    IF size < 1 OR size > (SELECT t.tree_size FROM expiryctl.audit_trail t WHERE t.singleton) THEN
        RETURN NULL;
    END IF;
    FOR lvl IN REVERSE 62..0 LOOP
        IF size & (1::bigint << lvl) <> 0 THEN
            -- The subtree (lvl, start >> lvl), at tlog's StoredHashIndex:
            -- 2m - popcount(m) + lvl, m = ((start >> lvl) + 1 << lvl) - 1.
            m := (((start >> lvl) + 1) << lvl) - 1;
            SELECT t.hash INTO STRICT h FROM expiryctl.audit_tree t WHERE t.idx = 2 * m - bit_count(m::bit(64)) + lvl;
            subtrees := subtrees || h;
            start := start + (1::bigint << lvl);
        END IF;
    END LOOP;
    root := subtrees[cardinality(subtrees)];
    FOR i IN REVERSE cardinality(subtrees) - 1..1 LOOP
        root := sha256('\x01'::bytea || subtrees[i] || root);
    END LOOP;
    RETURN root;
END
$$;


--
-- Name: audit_write(text, text, text, jsonb, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.audit_write(actor text, action text, target text, details jsonb, outcome text DEFAULT 'ok'::text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    INSERT INTO expiryctl.audit_log (actor, action, target, details, outcome)
    VALUES (actor, action, coalesce(target, ''), (coalesce(details, '{}') - 'build') || expiryctl.audit_build(), outcome)
$$;


--
-- Name: caller_in(text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.caller_in(VARIADIC groups text[]) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN expiryctl.caller_is_owner()
        OR EXISTS (SELECT 1 FROM unnest(groups) g
                   WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g)
                     AND pg_has_role(session_user, g, 'MEMBER'));
END
$$;


--
-- Name: caller_is_owner(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.caller_is_owner() RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- PL/pgSQL for the plan kept across calls, as caller_in.
    RETURN (SELECT pg_has_role(session_user, n.nspowner, 'MEMBER')
              FROM pg_namespace n WHERE n.nspname = 'expiryctl');
END
$$;


--
-- Name: count_word(bigint, text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.count_word(n bigint, one text, many text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT CASE WHEN n = 1 THEN one ELSE many END
$$;


--
-- Name: dead_letter_states_refuse_change(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.dead_letter_states_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format(
            'the state of dead letter %s cannot be deleted: the archive keeps every letter and what became of it', OLD.dead_letter_id));
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: of its state, only the status moves', OLD.dead_letter_id));
    RETURN NULL;
END
$$;


--
-- Name: dead_letters_refuse_change(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.dead_letters_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('dead letter %s cannot be deleted: the archive keeps every letter (retention redacts payloads)', OLD.id));
    END IF;
    -- A redaction empties the payload and the headers and changes nothing
    -- else: the columns its state row copies included, which would
    -- otherwise disagree with the letter.
    IF OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL AND NEW.payload = ''::bytea AND NEW.headers = '{}'::jsonb
       AND NEW.fingerprint = OLD.fingerprint AND NEW.payload_sha256 = OLD.payload_sha256
       AND NEW.job_key IS NOT DISTINCT FROM OLD.job_key AND NEW.message_id IS NOT DISTINCT FROM OLD.message_id
       AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
       AND NEW.idempotency_key IS NOT DISTINCT FROM OLD.idempotency_key
       AND NEW.expected_version IS NOT DISTINCT FROM OLD.expected_version
       AND NEW.properties IS NOT DISTINCT FROM OLD.properties
       AND NEW.source_system = OLD.source_system AND NEW.native IS NOT DISTINCT FROM OLD.native
       AND NEW.dead_lettered_at = OLD.dead_lettered_at
       AND NEW.reason_category = OLD.reason_category AND NEW.source_queue = OLD.source_queue
       AND NEW.error_class IS NOT DISTINCT FROM OLD.error_class AND NEW.attempts = OLD.attempts
       AND NEW.due_at IS NOT DISTINCT FROM OLD.due_at AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('letter-immutable', format(
        'dead letter %s is as it was captured: its identity, payload, properties and headers never change (retention redaction only)', OLD.id));
    RETURN NULL;
END
$$;


--
-- Name: dead_letters_track_state(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.dead_letters_track_state() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    bad record;
BEGIN
    SELECT * INTO bad FROM (
        SELECT n.id, n.source_system, n.source_queue, n.connection, q.queue_prefix, o.name AS other,
               CASE WHEN q.name IS NULL THEN NULL -- the foreign key's to refuse
                    WHEN NOT starts_with(n.source_queue, q.queue_prefix) OR o.name IS NOT NULL
                        THEN 'dead_letters_system_names_queue'
                    WHEN n.connection !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
                         OR q.names_connection_in_queue AND NOT starts_with(n.source_queue, q.queue_prefix || n.connection || '/')
                        THEN 'dead_letters_connection_named'
               END AS broken
          FROM new_rows n LEFT JOIN expiryctl.queue_systems q ON q.name = n.source_system
          LEFT JOIN LATERAL (SELECT o.name FROM expiryctl.queue_systems o
                              WHERE o.name <> n.source_system AND o.queue_prefix <> '' AND starts_with(n.source_queue, o.queue_prefix)
                              ORDER BY o.name LIMIT 1) o ON true) c
     WHERE c.broken IS NOT NULL
     ORDER BY c.id LIMIT 1;
    IF FOUND AND bad.broken = 'dead_letters_system_names_queue' THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = bad.broken, SCHEMA = 'expiryctl', TABLE = 'dead_letters',
            MESSAGE = 'new row for relation "dead_letters" violates constraint "dead_letters_system_names_queue": '
                || CASE WHEN bad.other IS NOT NULL
                        THEN format('a letter of the queue system %s names the queue %L, which is named as the system %s names its queues',
                                    bad.source_system, bad.source_queue, bad.other)
                        ELSE format('a letter of the queue system %s names the queue %L, which does not begin with %L as that system''s queue names do',
                                    bad.source_system, bad.source_queue, bad.queue_prefix) END;
    ELSIF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = bad.broken, SCHEMA = 'expiryctl', TABLE = 'dead_letters',
            MESSAGE = 'new row for relation "dead_letters" violates constraint "dead_letters_connection_named": '
                || CASE WHEN bad.connection !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'
                        THEN format('a letter names the connection %L, which is no connection''s name (letters, digits, ".", "_" and "-", at most 63, a letter or digit first): a letter names the connection it came from, never a server',
                                    bad.connection)
                        ELSE format('a letter of the queue system %s names the connection %L and the queue %L, which names another: its queue is named %sCONNECTION/…',
                                    bad.source_system, bad.connection, bad.source_queue, bad.queue_prefix) END;
    END IF;
    -- A statement trigger, not a default or the ingest function's work:
    -- every letter gets its state row, however it was inserted.
    INSERT INTO expiryctl.dead_letter_states (dead_letter_id, reason_category, source_queue, error_class, attempts,
        dead_lettered_at, due_at)
    SELECT id, reason_category, source_queue, error_class, attempts, dead_lettered_at, due_at
    FROM new_rows ORDER BY id;
    RETURN NULL;
END
$_$;


--
-- Name: handler_version_of(jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.handler_version_of(headers jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    SELECT left(CASE jsonb_typeof(headers->'x-handler-version')
        WHEN 'string' THEN headers->>'x-handler-version'
        WHEN 'object' THEN coalesce(encode(decode(coalesce(headers->'x-handler-version'->>'$bytes',
                                                           headers->'x-handler-version'->>'$string'), 'base64'), 'escape'), '')
        ELSE '' END, 200)
$_$;


--
-- Name: ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[], timestamp with time zone[], text[], text[], text[], text[], text[], text[], text[], integer[], text[], text[], text[], bytea[], timestamp with time zone[], bigint[], integer[], text[], text[], text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[] DEFAULT NULL::text[], source_systems text[] DEFAULT NULL::text[], natives text[] DEFAULT NULL::text[]) RETURNS SETOF bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT expiryctl.ingest_letters(actor, queue, fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys,
        expected_versions, due_ats, source_queues, origin_queues, original_exchanges, original_routing_keys,
        reason_categories, error_classes, last_errors, attempts, attempt_histories, headers, content_types, payloads,
        dead_lettered_ats, replay_request_ids, replay_counts, properties, source_systems, natives, NULL::text[])
$$;


--
-- Name: ingest_letters(text, text, bytea[], text[], text[], text[], text[], bigint[], timestamp with time zone[], text[], text[], text[], text[], text[], text[], text[], integer[], text[], text[], text[], bytea[], timestamp with time zone[], bigint[], integer[], text[], text[], text[], text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    ids bigint[];
    trusted boolean;
    dropped integer;
    by_run boolean;
    unknown text;
BEGIN
    -- Beside the ingester, a run captures its own cohort's queues (rule
    -- role): it must see its jobs die again (replay_run_captures).
    by_run := NOT expiryctl.caller_in('expiryctl_ingester');
    IF by_run AND NOT (expiryctl.caller_in('expiryctl_operator')
                       AND expiryctl.replay_run_captures(array_append(source_queues, queue))) THEN
        PERFORM expiryctl.require_role('dlq ingest', 'expiryctl_ingester', 'expiryctl_operator');
        PERFORM expiryctl.replay_refuse('role', format(
            'dlq ingest needs membership of expiryctl_ingester, and an operator captures only the dead-letter queues of a replay whose run holds its lease, which %s is not: '
            || 'ask the schema owner to run `expiryctl access grant %s expiryctl_ingester`',
            queue, session_user));
    END IF;
    label := expiryctl.actor_label(actor);
    SELECT string_agg(DISTINCT quote_literal(x), ', ') INTO unknown FROM unnest(source_systems) AS x
     WHERE x IS NOT NULL AND NOT EXISTS (SELECT 1 FROM expiryctl.queue_systems q WHERE q.name = x);
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'letters of a queue system this archive does not know: %', unknown
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'dead_letters_source_system_fkey', SCHEMA = 'expiryctl', TABLE = 'dead_letters',
                  DETAIL = format('it knows %s', (SELECT string_agg(name, ', ' ORDER BY name) FROM expiryctl.queue_systems)),
                  HINT = 'a queue system is registered by the `expiryctl migrate` of a release that has its driver';
    END IF;
    trusted := expiryctl.caller_is_owner();
    SELECT count(*) INTO dropped FROM unnest(replay_request_ids, job_keys) AS c(request, job)
     WHERE c.request IS NOT NULL AND NOT trusted AND NOT expiryctl.replay_published_job(c.request, c.job);
    WITH stored AS (
        INSERT INTO expiryctl.dead_letters (
            fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            payload_sha256, payload_size, dead_lettered_at, replay_request_id, replay_count, previous_id, properties,
            source_system, native, connection)
        SELECT s.fingerprint, s.job_key, s.message_id, s.reservation_id, s.idempotency_key, s.expected_version, s.due_at,
            s.source_queue, s.origin_queue, s.original_exchange, s.original_routing_key, s.reason_category,
            s.error_class, s.last_error, s.attempts, s.attempt_history::jsonb, s.headers::jsonb, s.content_type, s.payload,
            sha256(s.payload), length(s.payload), s.dead_lettered_at,
            CASE WHEN s.replay_request_id IS NULL OR trusted OR expiryctl.replay_published_job(s.replay_request_id, s.job_key)
                 THEN s.replay_request_id END,
            CASE WHEN s.replay_request_id IS NULL OR trusted OR expiryctl.replay_published_job(s.replay_request_id, s.job_key)
                 THEN s.replay_count ELSE 0 END,
            CASE WHEN s.job_key IS NOT NULL THEN
                (SELECT d.id FROM expiryctl.dead_letters d WHERE d.job_key = s.job_key ORDER BY d.id DESC LIMIT 1)
            END,
            s.properties::jsonb, k.system, s.native::jsonb,
            -- A queue that does not begin as its system's do still gets a
            -- connection here, so that dead_letters_system_names_queue,
            -- not the column's NOT NULL, says what is wrong with it.
            coalesce(s.connection, q.default_connection,
                     CASE WHEN q.names_connection_in_queue
                          THEN split_part(substr(s.source_queue, length(q.queue_prefix) + 1), '/', 1) END)
        FROM unnest(fingerprints, job_keys, message_ids, reservation_ids, idempotency_keys, expected_versions, due_ats,
            source_queues, origin_queues, original_exchanges, original_routing_keys, reason_categories, error_classes,
            last_errors, attempts, attempt_histories, headers, content_types, payloads, dead_lettered_ats,
            replay_request_ids, replay_counts, properties, source_systems, natives, connections) WITH ORDINALITY
            AS s(fingerprint, job_key, message_id, reservation_id, idempotency_key, expected_version, due_at,
            source_queue, origin_queue, original_exchange, original_routing_key, reason_category,
            error_class, last_error, attempts, attempt_history, headers, content_type, payload,
            dead_lettered_at, replay_request_id, replay_count, properties, source_system, native, connection, ordinal)
        -- A letter of a release before 00035 names no system: those
        -- captured from RabbitMQ alone.
        CROSS JOIN LATERAL (SELECT coalesce(s.source_system, 'rabbitmq') AS system) k
        LEFT JOIN expiryctl.queue_systems q ON q.name = k.system
        ORDER BY s.ordinal
        ON CONFLICT (fingerprint) DO NOTHING
        RETURNING id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO ids FROM stored;
    PERFORM expiryctl.audit_write(label, 'dlq.ingest.batch', 'queue:' || queue, jsonb_build_object(
        'letters', cardinality(fingerprints), 'stored', cardinality(ids),
        'duplicates', cardinality(fingerprints) - cardinality(ids),
        'first_id', coalesce(ids[1], 0), 'last_id', coalesce(ids[cardinality(ids)], 0))
        || CASE WHEN dropped > 0 THEN jsonb_build_object('lineage_dropped', dropped) ELSE '{}' END
        || CASE WHEN by_run THEN jsonb_build_object('by_run', true) ELSE '{}' END);
    RETURN QUERY SELECT unnest(ids);
END
$$;


--
-- Name: dead_letters; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letters (
    id bigint NOT NULL,
    fingerprint bytea NOT NULL,
    job_key text,
    message_id text,
    reservation_id text,
    idempotency_key text,
    expected_version bigint,
    due_at timestamp with time zone,
    source_queue text NOT NULL,
    origin_queue text,
    original_exchange text,
    original_routing_key text,
    reason_category text NOT NULL,
    error_class text,
    last_error text,
    attempts integer DEFAULT 0 NOT NULL,
    attempt_history jsonb DEFAULT '[]'::jsonb NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    content_type text,
    payload bytea NOT NULL,
    payload_sha256 bytea NOT NULL,
    payload_size integer NOT NULL,
    dead_lettered_at timestamp with time zone NOT NULL,
    ingested_at timestamp with time zone DEFAULT now() NOT NULL,
    previous_id bigint,
    replay_request_id bigint,
    replay_count integer DEFAULT 0 NOT NULL,
    redacted_at timestamp with time zone,
    properties jsonb,
    source_system text DEFAULT 'rabbitmq'::text NOT NULL,
    native jsonb,
    connection text DEFAULT 'rabbitmq'::text NOT NULL,
    CONSTRAINT dead_letters_reason_category_check CHECK ((reason_category = ANY (ARRAY['transient-exhausted'::text, 'validation'::text, 'not-found'::text, 'conflict'::text, 'malformed'::text, 'broker-expired'::text, 'broker-limit'::text, 'unknown'::text])))
);
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN last_error SET COMPRESSION lz4;
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN attempt_history SET COMPRESSION lz4;
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN headers SET COMPRESSION lz4;
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN payload SET COMPRESSION lz4;
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN properties SET COMPRESSION lz4;
ALTER TABLE ONLY expiryctl.dead_letters ALTER COLUMN native SET COMPRESSION lz4;


--
-- Name: TABLE dead_letters; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.dead_letters IS 'One row per dead-lettering of a reservation-expiry job, captured from a DLQ by expiryctl dlq ingest.';


--
-- Name: COLUMN dead_letters.properties; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.dead_letters.properties IS 'AMQP basic properties as received (deadletter.EncodeProperties); NULL when not recorded';


--
-- Name: COLUMN dead_letters.source_system; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.dead_letters.source_system IS 'The queue system the letter was captured from: a name of queue_systems.';


--
-- Name: COLUMN dead_letters.native; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.dead_letters.native IS 'The source system''s own attributes of the message, by their names there (SQS system attributes); NULL for RabbitMQ, whose are in properties.';


--
-- Name: COLUMN dead_letters.connection; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.dead_letters.connection IS 'The name of the connection the letter was captured from, which the operator''s configuration resolves; never a server.';


--
-- Name: letters_matching(jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.letters_matching(f jsonb) RETURNS SETOF expiryctl.dead_letters
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


--
-- Name: letters_named(text[], text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.letters_named(ids text[], verb_one text, verb_many text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT rtrim(CASE WHEN cardinality(ids) = 1 THEN 'dead letter ' || ids[1] || ' ' || verb_one
                      ELSE 'dead letters ' || array_to_string(ids, ', ') || ' ' || verb_many END)
$$;


--
-- Name: not_found(text, bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.not_found(kind text, id bigint) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION '%', CASE kind
            WHEN 'dead_letter' THEN format('dead letter %s not found: `expiryctl dlq list` shows the ids there are', id)
            WHEN 'replay_request' THEN format('replay request %s not found: `expiryctl replay list` shows the requests there are', id)
            WHEN 'policy_change' THEN format('policy change %s not found: `expiryctl policy show` lists the pending ones', id)
            ELSE format('%s %s not found', kind, id) END
        USING ERRCODE = 'EG002', DETAIL = kind || ':' || id;
END
$$;


--
-- Name: permanent_categories(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.permanent_categories() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT ARRAY['conflict', 'validation', 'malformed', 'not-found']
$$;


--
-- Name: policy_apply(jsonb, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    unknown text;
    bad_tables text;
BEGIN
    SELECT string_agg(k, ', ') INTO unknown FROM jsonb_object_keys(changes) k
     WHERE k NOT IN ('approvers', 'max_cohort', 'max_rate', 'approval_ttl', 'stop_failure_ratio', 'stop_queue_depth',
                     'stop_redead_ratio', 'canary_window', 'identity_mode', 'eligibility_query', 'retention',
                     'outcome_query', 'outcome_window', 'stop_unsettled_ratio', 'stop_conflict_ratio', 'signed_approvals', 'gap_query',
                     'job_tables');
    IF unknown IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('policy-keys', format('unknown policy keys: %s', unknown));
    END IF;
    IF changes ? 'job_tables' THEN
        IF jsonb_typeof(changes->'job_tables') <> 'object' THEN
            PERFORM expiryctl.replay_refuse('policy-keys', 'job_tables takes an object of mappings by queue name (jobtable://CONNECTION/SCHEMA.TABLE)');
        END IF;
        SELECT string_agg(quote_literal(k), ', ' ORDER BY k) INTO bad_tables FROM jsonb_each(changes->'job_tables') AS t(k, v)
         WHERE k !~ '^jobtable://[^/?#]+/[^/?#]+\.[^/?#]+$' AND k NOT LIKE 'jobtable://%/%/%'
            OR jsonb_typeof(v) NOT IN ('object', 'null');
        IF bad_tables IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('policy-keys', format('job_tables names %s: each key is a jobs table''s queue name, '
                || 'jobtable://CONNECTION/SCHEMA.TABLE, and each value its mapping (an object), or null to remove it', bad_tables));
        END IF;
    END IF;
    SELECT to_jsonb(p) - 'singleton' INTO before FROM expiryctl.policy p WHERE singleton FOR UPDATE;
    UPDATE expiryctl.policy SET
        approvers = CASE WHEN changes ? 'approvers' THEN ARRAY(SELECT jsonb_array_elements_text(changes->'approvers')) ELSE approvers END,
        max_cohort = CASE WHEN changes ? 'max_cohort' THEN (changes->>'max_cohort')::integer ELSE max_cohort END,
        max_rate = CASE WHEN changes ? 'max_rate' THEN (changes->>'max_rate')::numeric ELSE max_rate END,
        approval_ttl = CASE WHEN changes ? 'approval_ttl' THEN (changes->>'approval_ttl')::interval ELSE approval_ttl END,
        stop_failure_ratio = CASE WHEN changes ? 'stop_failure_ratio' THEN (changes->>'stop_failure_ratio')::numeric ELSE stop_failure_ratio END,
        stop_queue_depth = CASE WHEN changes ? 'stop_queue_depth' THEN (changes->>'stop_queue_depth')::integer ELSE stop_queue_depth END,
        stop_redead_ratio = CASE WHEN changes ? 'stop_redead_ratio' THEN (changes->>'stop_redead_ratio')::numeric ELSE stop_redead_ratio END,
        canary_window = CASE WHEN changes ? 'canary_window' THEN (changes->>'canary_window')::interval ELSE canary_window END,
        identity_mode = CASE WHEN changes ? 'identity_mode' THEN changes->>'identity_mode' ELSE identity_mode END,
        eligibility_query = CASE WHEN changes ? 'eligibility_query' THEN changes->>'eligibility_query' ELSE eligibility_query END,
        retention = CASE WHEN changes ? 'retention' THEN (changes->>'retention')::interval ELSE retention END,
        outcome_query = CASE WHEN changes ? 'outcome_query' THEN changes->>'outcome_query' ELSE outcome_query END,
        outcome_window = CASE WHEN changes ? 'outcome_window' THEN (changes->>'outcome_window')::interval ELSE outcome_window END,
        stop_unsettled_ratio = CASE WHEN changes ? 'stop_unsettled_ratio' THEN (changes->>'stop_unsettled_ratio')::numeric ELSE stop_unsettled_ratio END,
        stop_conflict_ratio = CASE WHEN changes ? 'stop_conflict_ratio' THEN (changes->>'stop_conflict_ratio')::numeric ELSE stop_conflict_ratio END,
        signed_approvals = CASE WHEN changes ? 'signed_approvals' THEN (changes->>'signed_approvals')::boolean ELSE signed_approvals END,
        gap_query = CASE WHEN changes ? 'gap_query' THEN changes->>'gap_query' ELSE gap_query END,
        job_tables = CASE WHEN changes ? 'job_tables'
                          THEN (SELECT coalesce(jsonb_object_agg(k, v), '{}') FROM jsonb_each(job_tables || (changes->'job_tables')) AS t(k, v)
                                 WHERE jsonb_typeof(v) <> 'null')
                          ELSE job_tables END,
        updated_at = now(), updated_by = by_label
     WHERE singleton;
    SELECT to_jsonb(p) - 'singleton' INTO after FROM expiryctl.policy p WHERE singleton;
END
$_$;


--
-- Name: policy_review(text, bigint, text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    c expiryctl.policy_changes%ROWTYPE;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy ' || decision, 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT * INTO c FROM expiryctl.policy_changes WHERE id = change FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('policy_change', change);
    END IF;
    IF c.status <> 'pending' THEN
        PERFORM expiryctl.replay_refuse('single-review', format('policy change %s is %s: it was already reviewed by %s',
            change, c.status, coalesce(c.reviewed_by, 'nobody')));
    END IF;
    IF c.proposed_db_role = session_user THEN
        PERFORM expiryctl.replay_refuse('four-eyes', format(
            'the login %s proposed policy change %s and cannot review it, whatever --actor says: another admin must', session_user, change));
    END IF;
    IF decision = 'approve' THEN
        SELECT * INTO r FROM expiryctl.policy_apply(c.changes, label);
        UPDATE expiryctl.policy_changes SET status = 'applied', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.approve', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'proposed_db_role', c.proposed_db_role,
            'why', coalesce(why, ''), 'before', r.before, 'after', r.after));
    ELSIF decision = 'reject' THEN
        UPDATE expiryctl.policy_changes SET status = 'rejected', reviewed_by = label, reviewed_db_role = session_user,
               reviewed_at = now() WHERE id = change;
        PERFORM expiryctl.audit_write(label, 'policy.reject', 'policy_change:' || change, jsonb_build_object(
            'changes', c.changes, 'proposed_by', c.proposed_by, 'why', coalesce(why, '')));
    ELSE
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
END
$$;


--
-- Name: policy_set(text, jsonb, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text) RETURNS TABLE(change_id bigint, applied boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    r record;
BEGIN
    PERFORM expiryctl.require_role('policy set', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    IF changes IS NULL OR jsonb_typeof(changes) <> 'object' OR changes = '{}' THEN
        PERFORM expiryctl.replay_refuse('policy-keys', 'name at least one KEY=VALUE');
    END IF;
    IF expiryctl.caller_is_owner() THEN
        SELECT * INTO r FROM expiryctl.policy_apply(changes, label);
        PERFORM expiryctl.audit_write(label, 'policy.set', 'policy', jsonb_build_object(
            'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
            'why', coalesce(why, ''), 'by_owner', true, 'before', r.before, 'after', r.after));
        change_id := NULL;
        applied := true;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Checked now, so that the proposer hears of a bad value, and again
    -- when it applies.
    BEGIN
        PERFORM expiryctl.policy_apply(changes, label);
        RAISE EXCEPTION USING ERRCODE = 'EG099';
    EXCEPTION WHEN SQLSTATE 'EG099' THEN
        NULL;
    END;
    INSERT INTO expiryctl.policy_changes (changes, why, proposed_by) VALUES (changes, coalesce(why, ''), label)
    RETURNING id INTO change_id;
    PERFORM expiryctl.audit_write(label, 'policy.propose', 'policy_change:' || change_id, jsonb_build_object(
        'keys', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(changes) k), 'changes', changes,
        'why', coalesce(why, '')));
    applied := false;
    RETURN NEXT;
END
$$;


--
-- Name: purge_letters(text, timestamp with time zone, integer, bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    keep interval;
    ids bigint[];
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('dlq purge', 'expiryctl_operator', 'expiryctl_admin');
    label := expiryctl.actor_label(actor);
    SELECT retention INTO keep FROM expiryctl.policy WHERE singleton;
    IF cutoff > now() - keep THEN
        PERFORM expiryctl.replay_refuse('retention', format(
            'the policy keeps letters for %s: a purge may redact only letters captured before %s, not before %s',
            keep, now() - keep, cutoff));
    END IF;
    FOR rid IN SELECT DISTINCT i.request_id FROM expiryctl.replay_items i
                 JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                WHERE i.open AND d.id > after AND d.ingested_at < cutoff AND d.redacted_at IS NULL
                ORDER BY 1 LOOP
        UPDATE expiryctl.replay_requests SET status = 'cancelled',
               halt_reason = 'voided: dlq purge redacted letters past retention that it held'
         WHERE id = rid AND status IN ('pending', 'approved', 'running', 'halted');
        IF FOUND THEN
            PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || rid, jsonb_build_object(
                'why', 'voided by dlq purge: letters it held passed the retention window', 'cutoff', cutoff));
        END IF;
    END LOOP;
    -- The batch's letters are locked first, and only the letters:
    -- replay_request_create locks the letters it freezes before it moves
    -- their status, so once this statement holds a letter, any request
    -- that took it has committed, and the next statement, on a snapshot of
    -- its own, sees the letter in_request and leaves it. Locking the state
    -- rows too would write a lock into each of them, a million in a large
    -- purge.
    SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}') INTO ids
      FROM (SELECT d.id FROM expiryctl.dead_letters d
              JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id
             WHERE d.id > after AND d.ingested_at < cutoff AND d.redacted_at IS NULL AND s.status <> 'in_request'
             ORDER BY d.id LIMIT greatest(batch, 1) FOR UPDATE OF d SKIP LOCKED) c;
    WITH redacted AS (
        UPDATE expiryctl.dead_letters d SET payload = '', headers = '{}', redacted_at = now()
         WHERE d.id = ANY (ids)
           AND NOT EXISTS (SELECT 1 FROM expiryctl.dead_letter_states s
                            WHERE s.dead_letter_id = d.id AND s.status = 'in_request')
        RETURNING d.id)
    SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}') INTO ids FROM redacted r;
    IF cardinality(ids) > 0 THEN
        PERFORM expiryctl.audit_write(label, 'dlq.purge.batch', '', jsonb_build_object(
            'cutoff', cutoff, 'redacted', cardinality(ids), 'first_id', ids[1], 'last_id', ids[cardinality(ids)]));
    END IF;
    RETURN QUERY SELECT unnest(ids);
END
$$;


--
-- Name: queue_systems_register(text[], text[], boolean[], boolean[], text[], text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.queue_systems_register(systems text[], queue_prefixes text[], in_place boolean[], connection_in_queue boolean[], default_connections text[], consumers_unseen text[]) RETURNS TABLE(queue_system text, change text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
#variable_conflict use_column
DECLARE
    n integer := coalesce(cardinality(systems), 0);
    problem text;
    clash record;
    held text;
    changing text;
BEGIN
    IF coalesce(cardinality(queue_prefixes), 0) <> n OR coalesce(cardinality(in_place), 0) <> n
       OR coalesce(cardinality(connection_in_queue), 0) <> n OR coalesce(cardinality(default_connections), 0) <> n
       OR coalesce(cardinality(queue_systems_register.consumers_unseen), 0) <> n THEN
        RAISE EXCEPTION 'queue_systems_register takes one name, queue prefix, retries_in_place, names_connection_in_queue, default connection and consumers_unseen for each system'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    -- One registration at a time; letters are captured and read meanwhile.
    LOCK TABLE expiryctl.queue_systems IN SHARE ROW EXCLUSIVE MODE;

    SELECT CASE
        WHEN g.name IS NULL OR g.name !~ '^[a-z][a-z0-9_]{0,62}$' THEN
            format('queue system name %L: use lower-case letters, digits and "_", a letter first, at most 63', g.name)
        WHEN count(*) OVER (PARTITION BY g.name) > 1 THEN
            format('queue system %s is registered twice in one migrate: each driver registers its own', g.name)
        WHEN g.prefix IS NULL OR g.prefix !~ '^[!-~]{0,64}$' THEN
            format('queue system %s: queue prefix %L: printable ASCII without spaces, at most 64 characters', g.name, g.prefix)
        WHEN g.retries IS NULL OR g.in_queue IS NULL THEN
            format('queue system %s: say whether a replay retries its jobs in place and whether its queue names carry their connection', g.name)
        WHEN g.prefix = '' AND (g.retries OR g.in_queue) THEN
            format('queue system %s has no queue prefix, but a system whose jobs are retried in place, or whose queue names carry their connection, is told by its queue names'' beginning: give it one (for instance %L)', g.name, g.name || '://')
        WHEN g.in_queue AND g.conn IS NOT NULL THEN
            format('queue system %s names its letters'' connection in their queue names (%sCONNECTION/…), so it takes no default connection', g.name, g.prefix)
        WHEN NOT g.in_queue AND g.conn IS NULL THEN
            format('queue system %s needs a default connection: its queue names carry none, and a capture that names none must name one', g.name)
        WHEN g.conn !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
            format('queue system %s: default connection %L is no connection''s name (letters, digits, ".", "_" and "-", at most 63, a letter or digit first)', g.name, g.conn)
        WHEN NOT (g.unseen ~ '\S' AND char_length(g.unseen) <= 300 AND g.unseen !~ '[\x01-\x1f\x7f-\x9f]') THEN
            format('queue system %s: why it shows no consumers (%L) is printed in refusals: write it as one sentence of printable characters, at most 300, or none for a system that shows its consumers', g.name, left(g.unseen, 80))
        END INTO problem
      FROM unnest(systems, queue_prefixes, in_place, connection_in_queue, default_connections, queue_systems_register.consumers_unseen)
           AS g(name, prefix, retries, in_queue, conn, unseen)
     ORDER BY 1 NULLS LAST LIMIT 1;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The systems as they will be: no prefix begins another's.
    WITH given AS (SELECT * FROM unnest(systems, queue_prefixes) AS g(name, prefix)),
         after AS (SELECT name, prefix FROM given
                   UNION ALL
                   SELECT s.name, s.queue_prefix FROM expiryctl.queue_systems s WHERE s.name <> ALL (systems))
    SELECT a.name AS a, a.prefix AS a_prefix, b.name AS b, b.prefix AS b_prefix INTO clash
      FROM after a JOIN after b ON a.name < b.name
     WHERE a.prefix = b.prefix OR (a.prefix <> '' AND starts_with(b.prefix, a.prefix))
        OR (b.prefix <> '' AND starts_with(a.prefix, b.prefix))
     ORDER BY 1, 3 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('queue systems %s and %s: the queue names of %s begin %L and those of %s %L, so a queue''s name would not say which system it is in',
                             clash.a, clash.b, clash.a, clash.a_prefix, clash.b, clash.b_prefix),
                  HINT = 'each system''s queue names begin with a prefix that no other system''s begins with or is the beginning of';
    END IF;

    -- Changes of how a system names or replays its queues wait for the
    -- captures of its letters under way, and are refused once it has any.
    SELECT string_agg(s.name, ', ' ORDER BY s.name) INTO changing
      FROM (SELECT s.name FROM expiryctl.queue_systems s
              JOIN unnest(systems, queue_prefixes, in_place, connection_in_queue) AS g(name, prefix, retries, in_queue) ON g.name = s.name
             WHERE (s.queue_prefix, s.retries_in_place, s.names_connection_in_queue) IS DISTINCT FROM (g.prefix, g.retries, g.in_queue)
             ORDER BY s.name FOR UPDATE OF s) s;
    SELECT string_agg(x, ', ' ORDER BY x) INTO held FROM unnest(string_to_array(changing, ', ')) AS x
     WHERE EXISTS (SELECT 1 FROM expiryctl.dead_letters d WHERE d.source_system = x);
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'the archive holds letters of %, captured and approved under the queue prefix, retries_in_place and names_connection_in_queue it has: a migrate changes none of those of a system with letters',
            held USING ERRCODE = 'object_in_use',
                       HINT = 'register a system of a new name for the new way, or keep the row as it is';
    END IF;
    -- A new or changed prefix must not take over another system's queues.
    SELECT format('%s (queue %L)', g.name, t.source_queue) INTO held
      FROM unnest(systems, queue_prefixes) AS g(name, prefix)
      LEFT JOIN expiryctl.queue_systems s ON s.name = g.name
      JOIN LATERAL (SELECT d.source_queue FROM expiryctl.dead_letter_tallies d
                     WHERE g.prefix <> '' AND starts_with(d.source_queue, g.prefix) AND d.letters > 0 LIMIT 1) t ON true
     WHERE s.queue_prefix IS DISTINCT FROM g.prefix
     ORDER BY g.name LIMIT 1;
    IF held IS NOT NULL THEN
        RAISE EXCEPTION 'queue system %: the archive holds letters of another system''s queue that its queue prefix would make its own', held
            USING ERRCODE = 'object_in_use';
    END IF;

    RETURN QUERY
    WITH given AS (SELECT * FROM unnest(systems, queue_prefixes, in_place, connection_in_queue, default_connections,
                                        queue_systems_register.consumers_unseen)
                                AS g(name, prefix, retries, in_queue, conn, unseen)),
         changed AS (
            UPDATE expiryctl.queue_systems s
               SET queue_prefix = g.prefix, retries_in_place = g.retries, names_connection_in_queue = g.in_queue,
                   default_connection = g.conn, consumers_unseen = g.unseen
              FROM given g
             WHERE s.name = g.name
               AND (s.queue_prefix, s.retries_in_place, s.names_connection_in_queue, s.default_connection, s.consumers_unseen)
                   IS DISTINCT FROM (g.prefix, g.retries, g.in_queue, g.conn, g.unseen)
            RETURNING s.name),
         added AS (
            INSERT INTO expiryctl.queue_systems (name, queue_prefix, retries_in_place, names_connection_in_queue, default_connection,
                                                 consumers_unseen)
            SELECT g.name, g.prefix, g.retries, g.in_queue, g.conn, g.unseen FROM given g
             WHERE NOT EXISTS (SELECT 1 FROM expiryctl.queue_systems s WHERE s.name = g.name)
             ORDER BY g.name
            RETURNING name)
    SELECT a.name, 'added' FROM added a
    UNION ALL
    SELECT c.name, 'changed' FROM changed c
    ORDER BY 1;
END
$_$;


--
-- Name: refuse_text(text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.refuse_text(rule text, message text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;


--
-- Name: replay_canary_record(text, bigint, boolean, jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: a canary belongs to a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    PERFORM expiryctl.audit_write(label, CASE WHEN passed THEN 'replay.canary.pass' ELSE 'replay.canary.start' END,
        'replay_request:' || request, coalesce(details, '{}') || jsonb_build_object('approval', req.approvals));
END
$$;


--
-- Name: replay_cancel(text, bigint, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay cancel', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF req.status = 'cancelled' THEN
        PERFORM expiryctl.replay_refuse('cancel', format('replay request %s is cancelled and cannot be cancelled (%s)',
            request, coalesce(req.halt_reason, 'cancelled')));
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'cancelled', halt_reason = 'cancelled by ' || label WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.cancel', 'replay_request:' || request,
                                  jsonb_build_object('why', coalesce(why, '')));
END
$$;


--
-- Name: replay_cohort_changes(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_cohort_changes(req bigint) RETURNS TABLE(dead_letter_id bigint, change text)
    LANGUAGE sql STABLE
    AS $$
    SELECT i.dead_letter_id,
           CASE
               WHEN d.id IS NULL THEN 'deleted'
               WHEN d.redacted_at IS NOT NULL THEN 'redacted'
               WHEN d.payload_sha256 <> i.payload_sha256 THEN 'payload changed'
               WHEN s.status = 'discarded' THEN 'discarded'
               WHEN EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id) THEN 're-ingested (dead-lettered again)'
           END
    FROM expiryctl.replay_items i
    LEFT JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
    LEFT JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = i.dead_letter_id
    WHERE i.request_id = req
      AND i.state NOT IN ('confirmed', 'skipped')
      AND (d.id IS NULL OR d.redacted_at IS NOT NULL OR d.payload_sha256 <> i.payload_sha256
           OR s.status = 'discarded'
           OR EXISTS (SELECT 1 FROM expiryctl.dead_letters n WHERE n.previous_id = d.id))
$$;


--
-- Name: replay_discard_window(bigint, integer, integer); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) RETURNS TABLE(status text, decided integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    k text;
    ids bigint[];
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT r.status, r.kind INTO status, k FROM expiryctl.replay_requests r WHERE r.id = request FOR SHARE;
    decided := 0;
    IF status IS DISTINCT FROM 'running' THEN
        status := coalesce(status, 'missing');
        RETURN NEXT;
        RETURN;
    END IF;
    IF k <> 'discard' THEN
        PERFORM expiryctl.replay_refuse('kind', format('replay request %s is a replay: it publishes, it does not discard', request));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    WITH done AS (
        UPDATE expiryctl.replay_items SET state = 'confirmed', confirmed_at = now(), attempts = attempts + 1, open = false
         WHERE request_id = request AND ordinal BETWEEN lo AND hi AND state IN ('pending', 'publishing')
        RETURNING dead_letter_id)
    SELECT coalesce(array_agg(dead_letter_id), '{}') INTO ids FROM done;
    UPDATE expiryctl.dead_letter_states s SET status = 'discarded' WHERE s.dead_letter_id = ANY (ids) AND s.status = 'in_request';
    decided := cardinality(ids);
    RETURN NEXT;
END
$$;


--
-- Name: replay_dlq_watch_check(bigint, text, jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_dlq_watch_check(request bigint, unwatched_why text, dlq_watch jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    missing text;
BEGIN
    IF unwatched_why IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT string_agg(format('%s (%s)', q.source_queue,
               coalesce(nullif(w.unwatched, ''), 'the runner did not say it captures it')), ', ' ORDER BY q.source_queue)
      INTO missing
      FROM expiryctl.replay_watched_queues(request) AS q(source_queue)
      LEFT JOIN LATERAL (SELECT e->>'unwatched' AS unwatched, e->>'by' AS by
                           FROM jsonb_array_elements(CASE WHEN jsonb_typeof(dlq_watch->'queues') = 'array'
                                                          THEN dlq_watch->'queues' ELSE '[]' END) e
                          WHERE e->>'queue' = q.source_queue LIMIT 1) w ON true
     WHERE coalesce(w.by, '') = '';
    IF missing IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('dlq-unwatched', format(
            'replay request %s: the run cannot see its jobs die again, because it does not capture the dead-letter queue %s: '
            || 'run it with `expiryctl replay run %s`, which captures them while it runs, once the queue exists and its server answers; '
            || 'or, if its outcomes are watched some other way, make a new request with --unwatched "why"',
            request, missing, request));
    END IF;
END
$$;


--
-- Name: replay_expire_stale(text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_expire_stale(actor text) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    rid bigint;
BEGIN
    PERFORM expiryctl.require_role('expiring stale requests', 'expiryctl_operator', 'expiryctl_approver',
                                   'expiryctl_auditor', 'expiryctl_admin', 'expiryctl_ingester');
    label := expiryctl.actor_label(actor);
    FOR rid IN UPDATE expiryctl.replay_requests SET status = 'expired'
                WHERE (status = 'pending' AND expires_at <= now()) OR (status = 'approved' AND approval_expires_at <= now())
                RETURNING id LOOP
        PERFORM expiryctl.audit_write(label, 'replay.expire', 'replay_request:' || rid,
                                      '{"reason": "review or approval window passed"}');
        RETURN NEXT rid;
    END LOOP;
END
$$;


--
-- Name: replay_handler_check(bigint, jsonb, jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_handler_check(request bigint, failed_under jsonb, consumers jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    failed text;
    running text;
    queues text;
    hint text := 'or, if replaying onto the same handler is what you mean, make a new request with --same-handler-ok "why"';
BEGIN
    IF consumers IS NULL OR jsonb_typeof(consumers) <> 'object' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: the runner did not say which consumers its queues have, so nothing shows that the handler changed since the cohort failed: '
            || 'run it with `expiryctl replay run %s`, which reads them from RabbitMQ''s management API, %s', request, request, hint));
    END IF;
    IF coalesce(consumers->>'unavailable', '') <> '' THEN
        PERFORM expiryctl.replay_refuse('handler-unverified', format(
            'replay request %s: cannot read the consumers of its queues (%s), so nothing shows that the handler changed since the cohort failed: '
            || 'fix --management-url / EXPIRYCTL_MANAGEMENT_URL and run it again, %s', request, left(consumers->>'unavailable', 500), hint));
    END IF;
    IF jsonb_typeof(consumers->'queues') IS DISTINCT FROM 'array' OR jsonb_array_length(consumers->'queues') = 0 THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: its targets route to no queue, so no consumer would take the replayed jobs: check the bindings, %s', request, hint));
    END IF;
    SELECT string_agg(q->>'queue', ', ') INTO queues FROM jsonb_array_elements(consumers->'queues') q;
    SELECT string_agg(DISTINCT CASE WHEN coalesce(c->>'handler_version', '') = '' THEN '(none advertised)' ELSE c->>'handler_version' END, ', ')
      INTO running
      FROM jsonb_array_elements(consumers->'queues') q
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c;
    IF running IS NULL THEN
        PERFORM expiryctl.replay_refuse('no-consumer', format(
            'replay request %s: queue %s has no consumer, so nothing would take the replayed jobs: start the fixed worker first, %s',
            request, queues, hint));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(consumers->'queues') q
                    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(q->'consumers') = 'array' THEN q->'consumers' ELSE '[]' END) c
                    WHERE coalesce(c->>'handler_version', '') <> '' AND NOT (failed_under ? (c->>'handler_version'))) THEN
        SELECT string_agg(CASE WHEN key = '' THEN '(none named)' ELSE key END || ': ' || value || ' letters', ', ' ORDER BY key)
          INTO failed FROM jsonb_each_text(failed_under);
        PERFORM expiryctl.replay_refuse('same-handler', format(
            'replay request %s: every consumer of queue %s runs a handler version the cohort failed under, or advertises none (consumed now by %s; failed under %s): '
            || 'replaying now repeats the failure. Deploy the fix (a worker whose connection advertises a new handler-version) and run it again, %s',
            request, queues, running, coalesce(failed, 'nothing'), hint));
    END IF;
END
$$;


--
-- Name: replay_item_not_before(timestamp with time zone, boolean, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN GREATEST(request_not_before, CASE WHEN (NOT include_not_due) THEN GREATEST(retry_after, due_at) ELSE NULL::timestamp with time zone END);


--
-- Name: replay_items_guard(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', 'replay items are never deleted');
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT * INTO req FROM expiryctl.replay_requests WHERE id = NEW.request_id;
        IF req.created_xid <> pg_current_xact_id() THEN
            PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                'the cohort of replay request %s was frozen when it was made: nothing can be added', NEW.request_id));
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.request_id <> OLD.request_id OR NEW.dead_letter_id <> OLD.dead_letter_id
       OR NEW.ordinal <> OLD.ordinal OR NEW.payload_sha256 <> OLD.payload_sha256
       OR NEW.retry_after IS DISTINCT FROM OLD.retry_after THEN
        PERFORM expiryctl.replay_refuse('cohort-frozen', format('the cohort of replay request %s is frozen', OLD.request_id));
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: replay_items_mark(bigint, integer, integer, bigint[], bigint[], text[], bigint[], text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    st text;
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- FOR SHARE: a cancel waits for this window's commit, and the runner
    -- sees the cancel at its next check.
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(skip) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'skipped', last_error = u.why
          FROM unnest(skip, skip_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(skip) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to skipped: the items changed under the runner', moved, cardinality(skip), request;
        END IF;
    END IF;
    IF cardinality(fail) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', last_error = u.why, attempts = i.attempts + 1
          FROM unnest(fail, fail_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = u.id
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(fail) THEN
            RAISE EXCEPTION 'moved % of % items of replay request % to failed: the items changed under the runner', moved, cardinality(fail), request;
        END IF;
    END IF;
    IF cardinality(publish) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'publishing'
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (publish)
           AND i.state IN ('pending', 'publishing');
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(publish) THEN
            RAISE EXCEPTION 'marked % of % items of replay request % publishing: the items changed under the runner', moved, cardinality(publish), request;
        END IF;
    END IF;
    RETURN st;
END
$$;


--
-- Name: replay_items_record(bigint, integer, integer, bigint[], bigint[], text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    moved integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- The request's row first, as replay_items_mark and replay_run_halt
    -- take it: a cancel locks that row, then (replay_request_ended) the
    -- letters and the items, so a recorder that took the items and then
    -- the letters could wait on a cancel that waits on it.
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(confirmed) > 0 THEN
        -- A confirmed item is done with its letter, so it no longer holds
        -- it: closing it here spares the request's end a second write.
        WITH done AS (
            UPDATE expiryctl.replay_items i SET state = 'confirmed', attempts = i.attempts + 1,
                   last_error = NULL, confirmed_at = now(), open = false
             WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (confirmed)
               AND i.state = 'publishing'
            RETURNING i.dead_letter_id),
        replayed AS (
            UPDATE expiryctl.dead_letter_states s SET status = 'replayed' FROM done
             WHERE s.dead_letter_id = done.dead_letter_id AND s.status = 'in_request')
        SELECT count(*) INTO moved FROM done;
        IF moved <> cardinality(confirmed) THEN
            RAISE EXCEPTION 'recorded % of % confirms for replay request %: the items changed under the runner', moved, cardinality(confirmed), request;
        END IF;
    END IF;
    IF cardinality(failed) > 0 THEN
        UPDATE expiryctl.replay_items i SET state = 'failed', attempts = i.attempts + 1, last_error = nullif(u.why, '')
          FROM unnest(failed, failed_why) AS u(id, why)
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (failed)
           AND i.dead_letter_id = u.id AND i.state = 'publishing';
        GET DIAGNOSTICS moved = ROW_COUNT;
        IF moved <> cardinality(failed) THEN
            RAISE EXCEPTION 'recorded % of % failed publishes for replay request %: the items changed under the runner', moved, cardinality(failed), request;
        END IF;
    END IF;
END
$$;


--
-- Name: replay_items_refuse_early_close(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_refuse_early_close() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF (SELECT status FROM expiryctl.replay_requests WHERE id = NEW.request_id) IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('item-states', format(
            'item %s of replay request %s is %s and its request is open: it keeps its letter until it is confirmed or the request ends',
            OLD.dead_letter_id, OLD.request_id, NEW.state));
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: replay_items_refuse_move(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_refuse_move() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF OLD.state = 'pending' AND NEW.state = 'confirmed'
       AND (SELECT kind FROM expiryctl.replay_requests WHERE id = NEW.request_id) = 'discard' THEN
        RETURN NEW;
    END IF;
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s is %s and cannot become %s: items move pending -> publishing -> confirmed, failed or skipped, and a decided item never moves again',
        OLD.dead_letter_id, OLD.request_id, OLD.state, NEW.state));
    RETURN NULL;
END
$$;


--
-- Name: replay_items_refuse_rewrite(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_refuse_rewrite() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('item-states', format(
        'item %s of replay request %s: a closed item is not reopened, and attempts, sends and confirm times are not rewritten',
        OLD.dead_letter_id, OLD.request_id));
    RETURN NULL;
END
$$;


--
-- Name: replay_items_send(bigint, integer, integer, bigint[], boolean); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    st text;
    bound smallint := expiryctl.replay_publish_bound();
    moved integer;
    spent bigint;
    early record;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    -- FOR SHARE, as replay_items_mark takes it: a cancel waits for this
    -- commit, and no item is cleared after the cancel has committed.
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(items) = 0 THEN
        RETURN st;
    END IF;
    SELECT i.dead_letter_id AS id, t.not_before INTO early
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
      JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
     CROSS JOIN LATERAL (SELECT expiryctl.replay_item_not_before(r.not_before, r.include_not_due, i.retry_after, d.due_at) AS not_before) t
     CROSS JOIN LATERAL expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                   r.to_exchange, r.to_routing_key, r.via_exchange) g
     WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
       AND t.not_before > now() + CASE WHEN delayed AND d.source_system = 'sqs' AND g.rk NOT LIKE '%.fifo'
                                       THEN interval '900 seconds' ELSE interval '0' END
     ORDER BY i.ordinal LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('not-before', format(
            'item %s of replay request %s may not be published before %s (the request''s --not-before, its letter''s Retry-After or its hold''s deadline): it was not cleared',
            early.id, request, to_char(early.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
    END IF;
    -- A job store's item sent again keeps its count at the bound, which
    -- the table's replay_items_publish_bound holds every item to.
    UPDATE expiryctl.replay_items i SET sends = least(i.sends + 1, bound)
     WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
       AND i.state = 'publishing'
       AND (i.sends < bound OR EXISTS (SELECT 1 FROM expiryctl.dead_letters d JOIN expiryctl.queue_systems q ON q.name = d.source_system
                                        WHERE d.id = i.dead_letter_id AND q.retries_in_place));
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved <> cardinality(items) THEN
        SELECT i.dead_letter_id INTO spent FROM expiryctl.replay_items i
         WHERE i.request_id = request AND i.ordinal BETWEEN lo AND hi AND i.dead_letter_id = ANY (items)
           AND i.state = 'publishing' AND i.sends >= bound
         ORDER BY i.ordinal LIMIT 1;
        IF FOUND THEN
            PERFORM expiryctl.replay_refuse('publish-bound', format(
                'item %s of replay request %s was sent to the broker %s times already without a recorded answer, the most one request may: it is not published again; make a new request with `expiryctl replay request` to send its letter',
                spent, request, bound));
        END IF;
        RAISE EXCEPTION 'cleared % of % items of replay request % for publishing: the items changed under the runner (each must be marked publishing)', moved, cardinality(items), request;
    END IF;
    RETURN st;
END
$$;


--
-- Name: replay_items_state_guard(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_items_state_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    bad record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM expiryctl.replay_requests r
                   WHERE r.id IN (SELECT DISTINCT n.request_id FROM new_rows n) AND r.status <> 'running') THEN
        RETURN NULL;
    END IF;
    SELECT n.request_id, r.status INTO bad
    FROM new_rows n
    JOIN old_rows o ON o.request_id = n.request_id AND o.dead_letter_id = n.dead_letter_id
    JOIN expiryctl.replay_requests r ON r.id = n.request_id
    WHERE n.state <> o.state AND n.state IN ('publishing', 'confirmed', 'failed', 'skipped')
      AND r.status <> 'running'
    LIMIT 1;
    IF FOUND THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: items move only while it runs', bad.request_id, bad.status));
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: replay_outcomes_record(bigint, bigint[], timestamp with time zone[], timestamp with time zone[], timestamp with time zone[], timestamp with time zone[], boolean[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    wanted integer;
    known integer;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF req.status IS DISTINCT FROM 'running' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: outcomes are recorded only by the run of a running request', request, coalesce(req.status, 'missing')));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(letters) IS DISTINCT FROM cardinality(published_ats) OR cardinality(letters) IS DISTINCT FROM cardinality(confirmed_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(window_ends) OR cardinality(letters) IS DISTINCT FROM cardinality(terminal_ats)
       OR cardinality(letters) IS DISTINCT FROM cardinality(duplicates) THEN
        RAISE EXCEPTION 'replay_outcomes_record: the arrays differ in length';
    END IF;
    SELECT count(DISTINCT l) INTO wanted FROM unnest(letters) l;
    SELECT count(*) INTO known FROM expiryctl.replay_items i
     WHERE i.request_id = request AND i.dead_letter_id = ANY (letters) AND i.state = 'confirmed';
    IF known <> wanted THEN
        PERFORM expiryctl.replay_refuse('confirmed-items', format(
            '%s not %s of replay request %s: an outcome belongs to an item the run confirmed',
            expiryctl.count_word(wanted, 'the letter is', format('%s of the %s letters are', wanted - known, wanted)),
            expiryctl.count_word(wanted, 'a confirmed item', 'confirmed items'), request));
    END IF;
    INSERT INTO expiryctl.replay_outcomes AS o (request_id, dead_letter_id, approval, published_at, confirmed_at,
                                                window_ends_at, terminal_at, duplicate)
    SELECT request, u.id, req.approvals, u.published_at, u.confirmed_at, u.window_ends_at, u.terminal_at, coalesce(u.duplicate, false)
      FROM unnest(letters, published_ats, confirmed_ats, window_ends, terminal_ats, duplicates)
           AS u(id, published_at, confirmed_at, window_ends_at, terminal_at, duplicate)
    ON CONFLICT (request_id, dead_letter_id) DO UPDATE
       SET terminal_at = excluded.terminal_at, duplicate = excluded.duplicate, observed_at = now()
     WHERE o.terminal_at IS NULL AND excluded.terminal_at IS NOT NULL;
END
$$;


--
-- Name: replay_publish_bound(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_publish_bound() RETURNS smallint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT 3::smallint
$$;


--
-- Name: replay_published_job(bigint, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_published_job(request bigint, job text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT EXISTS (SELECT 1 FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                    WHERE i.request_id = request AND d.job_key = job AND i.state IN ('publishing', 'confirmed'))
$$;


--
-- Name: replay_refuse(text, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_refuse(rule text, message text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- SQLSTATE EG001 marks a governance refusal; the detail names the rule so
    -- that expiryctl (or any client) can say which rule refused.
    RAISE EXCEPTION '%', message USING ERRCODE = 'EG001', DETAIL = 'rule: ' || rule;
END
$$;


--
-- Name: replay_request_create(text, text, jsonb, numeric, integer, text, text, text, boolean, boolean, boolean, text, boolean, boolean, timestamp with time zone, boolean, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean DEFAULT false, same_handler_why text DEFAULT NULL::text, include_permanent boolean DEFAULT false, via_exchange boolean DEFAULT false, not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, include_not_due boolean DEFAULT false, unwatched_why text DEFAULT NULL::text) RETURNS TABLE(request_id bigint, matched integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
#variable_conflict use_variable
DECLARE
    label text;
    pol expiryctl.policy%ROWTYPE;
    wanted bigint[];
    c_ids bigint[];
    c_hashes bytea[];
    c_retry timestamptz[];
    bad_retry text[];
    late_ids text[];
    oldest timestamptz;
    bound integer;
    n integer;
    bad_redacted text[];
    bad_taken text[];
    bad_decided text[];
    bad_changed text[];
    bad_target text[];
    sqs_misrouted text[];
    systems integer;
    system_names text;
    unseen text;
    publish_connections text;
    sqs_untargeted text[];
    jobs_misrouted text[];
    perm_n integer;
    perm_ids text[];
    perm_cats text;
    failed jsonb;
    tgts jsonb;
    eff_rate numeric;
    eff_canary integer;
    rid bigint;
    chash bytea;
BEGIN
    PERFORM expiryctl.require_role('replay request', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    IF kind NOT IN ('replay', 'discard') THEN
        PERFORM expiryctl.replay_refuse('kind', format('unknown request kind %L: replay or discard', kind));
    END IF;
    IF coalesce(why, '') !~ '\S' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why: --why names the incident or ticket');
    END IF;
    IF fresh_key AND NOT confirm_eligible THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a fresh idempotency key needs --confirm-eligible: confirm the reservations are still eligible to expire');
    END IF;
    IF fresh_key AND kind = 'discard' THEN
        PERFORM expiryctl.replay_refuse('fresh-key', 'a discard does not publish, so --fresh-key does not apply');
    END IF;
    IF same_handler_ok AND coalesce(btrim(same_handler_why), '') = '' THEN
        PERFORM expiryctl.replay_refuse('same-handler', 'say why the handler that failed these letters may take them again: --same-handler-ok "why"');
    END IF;
    IF kind = 'discard' AND (same_handler_ok OR include_permanent) THEN
        PERFORM expiryctl.replay_refuse('kind', 'a discard publishes nothing, so --same-handler-ok and --include-permanent do not apply');
    END IF;
    PERFORM expiryctl.replay_expire_stale(actor);
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton FOR SHARE;

    SELECT coalesce(array_agg(x::bigint ORDER BY ord), '{}') INTO wanted
      FROM jsonb_array_elements_text(coalesce(selection->'ids', '[]')) WITH ORDINALITY AS t(x, ord);
    bound := nullif(selection->>'max', '')::integer;
    IF cardinality(wanted) = 0 AND coalesce(bound, 0) <= 0 THEN
        PERFORM expiryctl.replay_refuse('bounded-cohort', 'a filter needs --max N: a request is bounded');
    END IF;
    IF rate <= 0 THEN
        PERFORM expiryctl.replay_refuse('max-rate', format('rate %s/s would never send: ask for a rate above 0, or none for the policy maximum of %s/s', rate, pol.max_rate));
    END IF;
    eff_rate := coalesce(rate, pol.max_rate);
    IF eff_rate > pol.max_rate THEN
        PERFORM expiryctl.replay_refuse('max-rate', format('rate %s/s is above the policy maximum of %s/s: lower --rate', eff_rate, pol.max_rate));
    END IF;
    IF bound > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('--max %s is above the policy maximum of %s letters per request', bound, pol.max_cohort));
    END IF;
    IF cardinality(wanted) > pol.max_cohort THEN
        PERFORM expiryctl.replay_refuse('max-cohort', format('%s ids is above the policy maximum of %s letters per request', cardinality(wanted), pol.max_cohort));
    END IF;

    -- The cohort is c_ids in run order (ordinal = position - 1), locked,
    -- with c_hashes the sha256 of each stored payload. Arrays, not a
    -- temporary table: a table in pg_temp could be the caller's own, with
    -- their triggers on it.
    IF cardinality(wanted) > 0 THEN
        SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}') INTO c_ids
          FROM (SELECT id FROM expiryctl.dead_letters WHERE id = ANY (wanted) ORDER BY id FOR UPDATE) d;
        IF cardinality(c_ids) < (SELECT count(DISTINCT x) FROM unnest(wanted) x) THEN
            SELECT min(x) INTO rid FROM unnest(wanted) x WHERE x <> ALL (c_ids);
            PERFORM expiryctl.not_found('dead_letter', rid);
        END IF;
        matched := cardinality(c_ids);
    ELSE
        SELECT count(*) INTO matched FROM expiryctl.letters_matching(selection->'filter');
        SELECT coalesce(array_agg(m.id ORDER BY m.dead_lettered_at, m.id), '{}') INTO c_ids
          FROM (SELECT d.id, d.dead_lettered_at FROM expiryctl.letters_matching(selection->'filter') l
                  JOIN expiryctl.dead_letters d ON d.id = l.id
                 ORDER BY l.dead_lettered_at, l.id LIMIT bound FOR UPDATE OF d) m;
    END IF;
    n := cardinality(c_ids);
    IF n = 0 THEN
        PERFORM expiryctl.replay_refuse('empty-cohort', 'no dead letter waiting for a decision matches: check the filter with `expiryctl dlq list` (letters already replayed, discarded or in an open request are not eligible)');
    END IF;
    SELECT array_agg(sha256(d.payload) ORDER BY c.ord) INTO c_hashes
      FROM unnest(c_ids) WITH ORDINALITY AS c(id, ord) JOIN expiryctl.dead_letters d ON d.id = c.id;

    SELECT array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.redacted_at IS NOT NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE s.status = 'in_request'),
           array_agg(d.id || ' (' || s.status || ')' ORDER BY d.id) FILTER (WHERE s.status <> 'dead'),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.payload_sha256 <> c.h),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE t.rk IS NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.source_system = 'sqs' AND t.rk IS NOT NULL
                                                        AND (t.rk NOT LIKE 'arn:aws:sqs:%' OR t.e <> '')),
           count(DISTINCT d.source_system), string_agg(DISTINCT d.source_system, ', ' ORDER BY d.source_system),
           CASE WHEN count(DISTINCT d.connection) FILTER (WHERE NOT q.retries_in_place) > 1
                THEN string_agg(DISTINCT d.connection, ', ') FILTER (WHERE NOT q.retries_in_place) END,
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.source_system = 'sqs' AND t.rk IS NULL),
           array_agg(d.id::text ORDER BY d.id) FILTER (WHERE q.retries_in_place
                                                        AND (coalesce(to_exchange, '') <> '' OR coalesce(to_routing_key, '') <> '' OR via_exchange OR fresh_key)),
           count(*) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())),
           (array_agg(d.id::text ORDER BY d.id) FILTER (WHERE d.reason_category = ANY (expiryctl.permanent_categories())))[1:10]
      INTO bad_redacted, bad_taken, bad_decided, bad_changed, bad_target, sqs_misrouted, systems, system_names, publish_connections, sqs_untargeted, jobs_misrouted, perm_n, perm_ids
      FROM unnest(c_ids, c_hashes) AS c(id, h) JOIN expiryctl.dead_letters d ON d.id = c.id
      JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = c.id
      LEFT JOIN expiryctl.queue_systems q ON q.name = d.source_system
     CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                                  to_exchange, to_routing_key, via_exchange)) t;
    IF bad_redacted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('redacted', format('%s redacted by retention: there is no payload left to replay', expiryctl.letters_named(bad_redacted, 'was', 'were')));
    END IF;
    IF bad_taken IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('one-open-request', format('%s already in another open request: leave %s out, or cancel that request first (`expiryctl replay list --status pending`)', expiryctl.letters_named(bad_taken, 'is', 'are'), expiryctl.count_word(cardinality(bad_taken), 'it', 'them')));
    END IF;
    IF bad_decided IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('decided', format('%s already decided and cannot join a request', expiryctl.letters_named(bad_decided, 'was', 'were')));
    END IF;
    IF bad_changed IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('letter-immutable', format('%s when captured: the payload was changed outside expiryctl', expiryctl.letters_named(bad_changed, 'no longer hashes as it did', 'no longer hash as they did')));
    END IF;
    -- A run publishes to one system, the one its letters came from: a
    -- letter goes back to a queue of the system it died in.
    IF kind = 'replay' AND systems > 1 THEN
        PERFORM expiryctl.replay_refuse('system', format('the letters come from more than one queue system (%s): a replay goes back to one; request each system''s letters apart (`expiryctl dlq list` shows each letter''s system)', system_names));
    END IF;
    -- A publishing run (of a system that does not retry in place) reaches
    -- one broker: the connection its letters came from, which the runner's
    -- configuration resolves by name.
    IF kind = 'replay' AND publish_connections IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('connection', format('the letters come from more than one connection (%s): a replay publishes through one; '
            || 'request each connection''s letters apart (`expiryctl dlq show ID` names a letter''s connection)', publish_connections));
    END IF;
    -- A job store keeps the failed job: a replay retries that job, with its
    -- own payload, in the queue it failed in, and sends no copy anywhere.
    -- The cohort is of one system here.
    IF kind = 'replay' AND jobs_misrouted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse(CASE WHEN fresh_key THEN 'fresh-key' ELSE 'target' END, format('%s of a job store (%s), which a replay retries in place, '
            || 'with the payload the store holds: --to-exchange, --routing-key, --via-exchange and --fresh-key do not apply', expiryctl.letters_named(jobs_misrouted, 'is a job', 'are jobs'), system_names));
    END IF;
    -- SQS's own rules: a letter of SQS goes back to an SQS queue, which it
    -- names by its ARN, and SQS says which queue a letter came from only
    -- in some cases; each refusal says how to name the queue.
    IF kind = 'replay' AND sqs_untargeted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s captured from SQS with no word of the queue it came from (SQS says it only of a letter its redrive moved, '
            || 'as DeadLetterQueueSourceArn, or when one queue alone redrives to the DLQ): name that queue with --routing-key arn:aws:sqs:REGION:ACCOUNT:NAME', expiryctl.letters_named(sqs_untargeted, 'was', 'were')));
    END IF;
    IF kind = 'replay' AND sqs_misrouted IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s captured from SQS, and a letter of SQS goes back to an SQS queue, named by its ARN: '
            || '--routing-key arn:aws:sqs:REGION:ACCOUNT:NAME; --to-exchange and --via-exchange are RabbitMQ''s', expiryctl.letters_named(sqs_misrouted, 'was', 'were')));
    END IF;
    IF kind = 'replay' AND bad_target IS NOT NULL AND via_exchange THEN
        PERFORM expiryctl.replay_refuse('target', format('%s no origin (no x-original-exchange, no x-death queue): add --to-exchange and --routing-key', expiryctl.letters_named(bad_target, 'names', 'name')));
    END IF;
    IF kind = 'replay' AND bad_target IS NOT NULL THEN
        PERFORM expiryctl.replay_refuse('target', format('%s no queue it failed in (no x-death), so a replay cannot go back to that queue alone: '
            || 'name it with --routing-key QUEUE, or add --via-exchange to publish through the original exchange, where every queue bound to it gets a copy', expiryctl.letters_named(bad_target, 'names', 'name')));
    END IF;
    IF kind = 'discard' AND (via_exchange OR not_before IS NOT NULL OR include_not_due OR unwatched_why IS NOT NULL) THEN
        PERFORM expiryctl.replay_refuse('kind', 'a discard publishes nothing, so --via-exchange, --not-before, --include-not-due and --unwatched do not apply');
    END IF;
    IF unwatched_why IS NOT NULL AND btrim(unwatched_why) = '' THEN
        PERFORM expiryctl.replay_refuse('dlq-unwatched', 'say why the run need not see its jobs die again: --unwatched "why" (for example: a `dlq ingest --follow` of another site captures them)');
    END IF;

    IF kind = 'replay' AND perm_n > 0 AND NOT include_permanent THEN
        SELECT string_agg(cat || ' ' || k, ', ' ORDER BY cat) INTO perm_cats
          FROM (SELECT d.reason_category AS cat, count(*) AS k FROM unnest(c_ids) AS c(id)
                  JOIN expiryctl.dead_letters d ON d.id = c.id
                 WHERE d.reason_category = ANY (expiryctl.permanent_categories()) GROUP BY 1) s;
        PERFORM expiryctl.replay_refuse('permanent-letters', format(
            '%1$s failed for good (%2$s: %3$s%4$s): a retry fails the same way. Leave %5$s out (for instance --reason transient-exhausted), '
            || 'ask for %5$s to be discarded with `expiryctl dlq discard` (a second person approves), or, if a fix makes %5$s worth retrying, add --include-permanent',
            expiryctl.count_word(n, 'the letter', format('%s of the %s letters', perm_n, n)), perm_cats, expiryctl.letters_named(perm_ids, '', ''),
            CASE WHEN perm_n > 10 THEN ', …' ELSE '' END, expiryctl.count_word(perm_n, 'it', 'them')));
    END IF;

    -- Time: no replay is scheduled into the past, or to after retention
    -- redacts its letters (from their capture, as dlq purge counts it);
    -- the Retry-After each letter's last error carried is frozen with its
    -- item, and one that cannot be read is refused rather than guessed.
    IF not_before IS NOT NULL AND not_before < now() THEN
        PERFORM expiryctl.replay_refuse('not-before', format('--not-before %s is in the past (the database''s clock says %s): name a later time, or leave it out to replay when the run starts',
            to_char(not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
    END IF;
    SELECT array_agg(expiryctl.retry_after_of(d.headers, d.dead_lettered_at) ORDER BY c.ord), min(d.ingested_at)
      INTO c_retry, oldest
      FROM unnest(c_ids) WITH ORDINALITY AS c(id, ord) JOIN expiryctl.dead_letters d ON d.id = c.id;
    IF not_before IS NOT NULL AND not_before > oldest + pol.retention THEN
        PERFORM expiryctl.replay_refuse('not-before', format('--not-before %s is after retention redacts the oldest letter of the cohort (captured %s, retention %s): name an earlier time',
            to_char(not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), to_char(oldest AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), pol.retention));
    END IF;
    IF kind = 'replay' AND NOT include_not_due THEN
        SELECT array_agg(format('%s (%s)', d.id, left(coalesce(d.headers->>'x-retry-after', d.headers->>'retry-after', d.headers->>'Retry-After', '?'), 40)) ORDER BY d.id)
                   FILTER (WHERE c.r = 'infinity'),
               array_agg(d.id::text ORDER BY d.id)
                   FILTER (WHERE c.r IS DISTINCT FROM 'infinity' AND greatest(c.r, d.due_at) > d.ingested_at + pol.retention)
          INTO bad_retry, late_ids
          FROM unnest(c_ids, c_retry) AS c(id, r) JOIN expiryctl.dead_letters d ON d.id = c.id;
        IF bad_retry IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('retry-after', format('%s a Retry-After that is neither seconds nor an HTTP date, so when it may go again is unknown: '
                || 'leave %s out, or add --include-not-due to publish without waiting', expiryctl.letters_named(bad_retry, 'carries', 'carry'), expiryctl.count_word(cardinality(bad_retry), 'it', 'them')));
        END IF;
        IF late_ids IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('not-before', format('%s not due (the hold''s deadline or Retry-After) until after retention redacts the letter: '
                || 'leave %s out, or add --include-not-due to publish without waiting', expiryctl.letters_named(late_ids, 'is', 'are'), expiryctl.count_word(cardinality(late_ids), 'it', 'them')));
        END IF;
    END IF;

    -- The handler check reads who consumes the targets, and a system that
    -- shows nobody (consumers_unseen says why: SQS, a job store whose
    -- workers take jobs without registering) leaves it nothing to read,
    -- so that a run would be refused after its approval
    -- (handler-unverified). The requester vouches for the handler now, and
    -- the approver reads the reason. The cohort is of one system here.
    IF kind = 'replay' AND same_handler_ok IS NOT TRUE THEN
        SELECT q.consumers_unseen INTO unseen FROM expiryctl.queue_systems q WHERE q.name = system_names;
        IF unseen IS NOT NULL THEN
            PERFORM expiryctl.replay_refuse('handler-unseen', format('%s, so nothing can tell whether a consumer runs a fixed handler: '
                || 'say why the handler is the same, --same-handler-ok "why" (docs/governance.md)', unseen));
        END IF;
    END IF;

    -- The handler versions the cohort failed under, and where its letters
    -- go, frozen with it: replay_run_start judges the consumers the runner
    -- observed against them, and the approver sees both. One more read of
    -- the cohort's letters by id, grouped once for both.
    -- A target names its system when it is not RabbitMQ's, and its
    -- connection when that is not the one called rabbitmq, so that a
    -- RabbitMQ request's statement reads as it did before there were two:
    -- a form the runner and approvers' signatures keep, not a rule of
    -- RabbitMQ's; every other system's targets name both.
    WITH g AS (
        SELECT expiryctl.handler_version_of(d.headers) AS v, t.e, t.rk, d.source_system AS sys, d.connection AS conn, count(*) AS k
          FROM unnest(c_ids) AS c(id) JOIN expiryctl.dead_letters d ON d.id = c.id
         CROSS JOIN LATERAL (SELECT * FROM expiryctl.replay_target_of(d.original_exchange, d.original_routing_key, d.origin_queue, d.source_queue,
                                                                      to_exchange, to_routing_key, via_exchange)) t
         GROUP BY 1, 2, 3, 4, 5)
    SELECT (SELECT coalesce(jsonb_object_agg(v, k), '{}') FROM (SELECT v, sum(k)::bigint AS k FROM g GROUP BY v) a),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('exchange', e, 'routing_key', rk, 'letters', k)
                                      || CASE WHEN sys <> 'rabbitmq' THEN jsonb_build_object('system', sys) ELSE '{}' END
                                      || CASE WHEN sys <> 'rabbitmq' OR conn <> 'rabbitmq' THEN jsonb_build_object('connection', conn) ELSE '{}' END
                                      ORDER BY k DESC, e, rk), '[]')
              FROM (SELECT e, rk, sys, conn, sum(k)::bigint AS k FROM g WHERE rk IS NOT NULL GROUP BY e, rk, sys, conn ORDER BY 5 DESC, 1, 2 LIMIT 20) b)
      INTO failed, tgts;

    eff_canary := CASE WHEN kind = 'replay' THEN greatest(1, n / 10) ELSE 0 END;
    IF canary IS NOT NULL THEN
        eff_canary := least(greatest(canary, 0), n);
    END IF;
    SELECT sha256(string_agg(int8send(c.id) || c.h, ''::bytea ORDER BY c.ord)) INTO chash
      FROM unnest(c_ids, c_hashes) WITH ORDINALITY AS c(id, h, ord);

    INSERT INTO expiryctl.replay_requests (kind, filter, item_count, cohort_hash, rate, canary, stop_failure_ratio,
        stop_queue_depth, stop_redead_ratio, canary_window, fresh_key, eligibility_confirmed, to_exchange,
        to_routing_key, why, requested_by, expires_at, same_handler_ok, same_handler_why, include_permanent,
        failed_under, targets, via_exchange, not_before, include_not_due, unwatched_why)
    VALUES (kind, selection, n, chash, eff_rate, eff_canary, pol.stop_failure_ratio, pol.stop_queue_depth,
        pol.stop_redead_ratio, pol.canary_window, fresh_key, confirm_eligible, nullif(to_exchange, ''),
        nullif(to_routing_key, ''), why, label, now() + pol.approval_ttl, same_handler_ok,
        CASE WHEN same_handler_ok THEN same_handler_why END, include_permanent, failed, tgts, via_exchange, not_before,
        kind = 'replay' AND include_not_due, unwatched_why)
    RETURNING id INTO rid;
    INSERT INTO expiryctl.replay_items (request_id, dead_letter_id, payload_sha256, ordinal, retry_after)
    SELECT rid, c.id, c.h, (c.ord - 1)::integer, nullif(c.r, 'infinity')
      FROM unnest(c_ids, c_hashes, c_retry) WITH ORDINALITY AS c(id, h, r, ord);
    UPDATE expiryctl.dead_letter_states SET status = 'in_request' WHERE dead_letter_id = ANY (c_ids);
    PERFORM expiryctl.audit_write(label, 'replay.request', 'replay_request:' || rid, jsonb_build_object(
        'kind', kind, 'selection', selection, 'matched', matched, 'items', to_jsonb(c_ids),
        'cohort_hash', encode(chash, 'hex'), 'rate', eff_rate, 'canary', eff_canary, 'fresh_key', fresh_key,
        'to_exchange', coalesce(to_exchange, ''), 'to_routing_key', coalesce(to_routing_key, ''), 'why', why,
        'same_handler_ok', same_handler_ok, 'same_handler_why', CASE WHEN same_handler_ok THEN same_handler_why ELSE '' END,
        'include_permanent', include_permanent, 'permanent_letters', perm_n, 'failed_under', failed, 'targets', tgts,
        'via_exchange', via_exchange, 'not_before', not_before, 'include_not_due', include_not_due)
        || CASE WHEN unwatched_why IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('unwatched_why', unwatched_why) END);
    request_id := rid;
    RETURN NEXT;
END
$_$;


--
-- Name: replay_request_ended(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_request_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.status IN ('rejected', 'expired', 'completed', 'cancelled') AND OLD.status <> NEW.status THEN
        UPDATE expiryctl.dead_letter_states s SET status = 'dead'
         WHERE s.dead_letter_id = ANY (ARRAY(SELECT i.dead_letter_id FROM expiryctl.replay_items i
                                  WHERE i.request_id = NEW.id AND i.open))
           AND s.status = 'in_request';
        UPDATE expiryctl.replay_items SET open = false WHERE request_id = NEW.id AND open;
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: replay_request_guard(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_request_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    pol expiryctl.policy%ROWTYPE;
    changed record;
BEGIN
    SELECT * INTO pol FROM expiryctl.policy WHERE singleton;

    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.reviewed_by IS NOT NULL OR NEW.approval_spent THEN
            PERFORM expiryctl.replay_refuse('new-requests-pending', 'a replay request starts pending and unreviewed');
        END IF;
        IF NEW.item_count > pol.max_cohort THEN
            PERFORM expiryctl.replay_refuse('max-cohort', format(
                'the cohort has %s letters and policy allows at most %s per request: narrow the filter or lower --max',
                NEW.item_count, pol.max_cohort));
        END IF;
        IF NEW.rate > pol.max_rate THEN
            PERFORM expiryctl.replay_refuse('max-rate', format(
                'rate %s/s is above the policy maximum of %s/s: lower --rate', NEW.rate, pol.max_rate));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.requested_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the requester must be the database role %s, not %s',
                session_user, NEW.requested_by));
        END IF;
        NEW.requested_db_role := session_user;
        NEW.created_xid := pg_current_xact_id();
        RETURN NEW;
    END IF;

    IF NEW.kind IS DISTINCT FROM OLD.kind OR NEW.filter IS DISTINCT FROM OLD.filter
       OR NEW.item_count IS DISTINCT FROM OLD.item_count OR NEW.cohort_hash IS DISTINCT FROM OLD.cohort_hash
       OR NEW.rate IS DISTINCT FROM OLD.rate OR NEW.canary IS DISTINCT FROM OLD.canary
       OR NEW.fresh_key IS DISTINCT FROM OLD.fresh_key OR NEW.to_exchange IS DISTINCT FROM OLD.to_exchange
       OR NEW.to_routing_key IS DISTINCT FROM OLD.to_routing_key OR NEW.requested_by IS DISTINCT FROM OLD.requested_by
       OR NEW.requested_db_role IS DISTINCT FROM OLD.requested_db_role OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.created_xid IS DISTINCT FROM OLD.created_xid
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.why IS DISTINCT FROM OLD.why
       OR NEW.stop_failure_ratio IS DISTINCT FROM OLD.stop_failure_ratio
       OR NEW.stop_queue_depth IS DISTINCT FROM OLD.stop_queue_depth
       OR NEW.stop_redead_ratio IS DISTINCT FROM OLD.stop_redead_ratio
       OR NEW.canary_window IS DISTINCT FROM OLD.canary_window
       OR NEW.eligibility_confirmed IS DISTINCT FROM OLD.eligibility_confirmed THEN
        PERFORM expiryctl.replay_refuse('frozen-request', format('replay request %s is frozen: its cohort and limits cannot be changed', OLD.id));
    END IF;

    IF NEW.status = OLD.status THEN
        IF NEW.reviewed_by IS DISTINCT FROM OLD.reviewed_by OR NEW.reviewed_db_role IS DISTINCT FROM OLD.reviewed_db_role
           OR NEW.reviewed_at IS DISTINCT FROM OLD.reviewed_at THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s: it was already reviewed by %s', OLD.id, OLD.status, coalesce(OLD.reviewed_by, 'nobody')));
        END IF;
        IF NEW.approval_spent IS DISTINCT FROM OLD.approval_spent OR NEW.approvals IS DISTINCT FROM OLD.approvals
           OR NEW.approval_expires_at IS DISTINCT FROM OLD.approval_expires_at
           OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.finished_at IS DISTINCT FROM OLD.finished_at THEN
            PERFORM expiryctl.replay_refuse('single-use-approval', format(
                'the approval of replay request %s changes only through a review or the start of a run', OLD.id));
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.status IN ('approved', 'rejected') THEN
        IF OLD.status NOT IN ('pending', 'halted') THEN
            PERFORM expiryctl.replay_refuse('single-review', format(
                'replay request %s is %s, not pending: it was already reviewed', OLD.id, OLD.status));
        END IF;
        IF now() >= OLD.expires_at AND OLD.status = 'pending' THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'replay request %s expired at %s: ask the requester to make a new one', OLD.id, OLD.expires_at));
        END IF;
        IF session_user = OLD.requested_db_role THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                'the login %s requested replay request %s and cannot review it, whatever --actor says: another approver must',
                session_user, OLD.id));
        END IF;
        IF NEW.reviewed_by IS NULL OR NEW.reviewed_by = OLD.requested_by THEN
            PERFORM expiryctl.replay_refuse('four-eyes', format(
                '%s requested replay request %s and cannot review it: another approver must', OLD.requested_by, OLD.id));
        END IF;
        IF pol.identity_mode = 'db-role' AND NEW.reviewed_by <> session_user THEN
            PERFORM expiryctl.replay_refuse('identity-db-role', format(
                'policy identity_mode is db-role: the reviewer must be the database role %s, not %s',
                session_user, NEW.reviewed_by));
        END IF;
        IF cardinality(pol.approvers) > 0 AND NOT (session_user = ANY (pol.approvers)) THEN
            PERFORM expiryctl.replay_refuse('approvers', format(
                'the login %s is not an approver under the policy (approvers: %s)', session_user,
                array_to_string(pol.approvers, ', ')));
        END IF;
        IF NEW.status = 'approved' THEN
            SELECT * INTO changed FROM expiryctl.replay_cohort_changes(OLD.id) LIMIT 1;
            IF FOUND THEN
                PERFORM expiryctl.replay_refuse('cohort-frozen', format(
                    'the cohort of replay request %s changed since it was frozen (dead letter %s: %s): make a new request',
                    OLD.id, changed.dead_letter_id, changed.change));
            END IF;
            NEW.approval_spent := false;
            NEW.approvals := OLD.approvals + 1;
            NEW.approval_expires_at := now() + pol.approval_ttl;
            NEW.halt_reason := NULL;
        END IF;
        NEW.reviewed_db_role := session_user;
        NEW.reviewed_at := now();
        -- A rejection ends the request, as a cancel or a completion does.
        IF NEW.status = 'rejected' THEN
            NEW.finished_at := now();
        END IF;
        RETURN NEW;
    END IF;

    IF NEW.status = 'running' THEN
        IF OLD.status <> 'approved' OR OLD.approval_spent THEN
            PERFORM expiryctl.replay_refuse('approved-to-run', format(
                'replay request %s is %s: only an approved request runs', OLD.id, OLD.status));
        END IF;
        IF OLD.approval_expires_at < now() THEN
            PERFORM expiryctl.replay_refuse('approval-ttl', format(
                'the approval of replay request %s expired: it must be approved again', OLD.id));
        END IF;
        NEW.approval_spent := true;
        NEW.started_at := coalesce(OLD.started_at, now());
        RETURN NEW;
    END IF;

    IF NEW.status IN ('halted', 'completed') AND OLD.status <> 'running' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: only a running request halts or completes', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'pending' THEN
        PERFORM expiryctl.replay_refuse('run-transition', format(
            'replay request %s is %s: no request goes back to pending', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'cancelled' AND OLD.status NOT IN ('pending', 'approved', 'running', 'halted') THEN
        PERFORM expiryctl.replay_refuse('cancel', format('replay request %s is %s and cannot be cancelled', OLD.id, OLD.status));
    END IF;
    IF NEW.status = 'expired' AND NOT (
        (OLD.status = 'pending' AND OLD.expires_at <= now()) OR
        (OLD.status = 'approved' AND OLD.approval_expires_at <= now())) THEN
        PERFORM expiryctl.replay_refuse('expire', format('replay request %s is %s and cannot expire', OLD.id, OLD.status));
    END IF;
    IF OLD.status IN ('rejected', 'expired', 'completed', 'cancelled') THEN
        PERFORM expiryctl.replay_refuse('terminal', format('replay request %s is %s: it is over', OLD.id, OLD.status));
    END IF;
    IF NEW.status IN ('completed', 'cancelled', 'rejected', 'expired') THEN
        NEW.finished_at := now();
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: replay_requests_handler_frozen(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_requests_handler_frozen() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM expiryctl.replay_refuse('frozen-request', format(
        'replay request %s is frozen: --same-handler-ok, its reason, --include-permanent and the versions and targets of its cohort are set when it is requested and never change; make a new request',
        OLD.id));
    RETURN NULL;
END
$$;


--
-- Name: replay_retries_in_place(text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_retries_in_place(system text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT coalesce((SELECT q.retries_in_place FROM expiryctl.queue_systems q WHERE q.name OPERATOR(pg_catalog.=) system), false)
$$;


--
-- Name: replay_review(text, bigint, text, text, boolean, bytea, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    label text;
    req expiryctl.replay_requests%ROWTYPE;
    after expiryctl.replay_requests%ROWTYPE;
BEGIN
    PERFORM expiryctl.require_role('replay ' || decision, 'expiryctl_approver');
    label := expiryctl.actor_label(actor);
    IF decision NOT IN ('approve', 'reject') THEN
        PERFORM expiryctl.replay_refuse('decision', format('unknown decision %L: approve or reject', decision));
    END IF;
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF decision = 'reject' AND coalesce(why, '') !~ '\S' THEN
        PERFORM expiryctl.replay_refuse('why', 'say why you reject it: --why');
    END IF;
    IF req.status NOT IN ('pending', 'halted') THEN
        PERFORM expiryctl.replay_refuse('single-review', format('replay request %s is %s: it was already reviewed%s',
            request, req.status, coalesce(' by ' || req.reviewed_by, '')));
    END IF;
    IF signed_note IS NOT NULL AND (decision <> 'approve'
        OR position(E'\nrequest ' || request || E'\n' IN signed_note) = 0
        OR position(E'\ncohort ' || encode(req.cohort_hash, 'hex') || E'\n' IN signed_note) = 0) THEN
        PERFORM expiryctl.replay_refuse('signed-approval', format(
            'the signed statement is not an approval of replay request %s with cohort hash %s: sign what `expiryctl replay show %s` shows',
            request, encode(req.cohort_hash, 'hex'), request));
    END IF;
    UPDATE expiryctl.replay_requests
       SET status = CASE WHEN decision = 'approve' THEN 'approved' ELSE 'rejected' END,
           reviewed_by = label, review_why = nullif(why, ''),
           approval_note = CASE WHEN decision = 'approve' THEN signed_note END
     WHERE id = request RETURNING * INTO after;
    -- Checked after the guard trigger's rules (four-eyes, approvers, expiry,
    -- a changed cohort), which say more; a refusal here undoes the update.
    IF decision = 'approve' THEN
        IF shown_cohort_hash IS NULL OR shown_cohort_hash <> req.cohort_hash THEN
            PERFORM expiryctl.replay_refuse('cohort-hash', format(
                'replay request %s has cohort hash %s, not the %s you were shown: run `expiryctl replay show %s` again and approve what it shows',
                request, encode(req.cohort_hash, 'hex'), coalesce(encode(shown_cohort_hash, 'hex'), 'none'), request));
        END IF;
        IF req.fresh_key AND NOT allow_fresh_key THEN
            PERFORM expiryctl.replay_refuse('fresh-key', format(
                'replay request %s gives every job a new idempotency key, so the worker will not recognise a job it already did: approve with --allow-fresh-key if that is what you want', request));
        END IF;
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.' || decision, 'replay_request:' || request, jsonb_build_object(
        'why', coalesce(why, ''), 'cohort_hash', encode(after.cohort_hash, 'hex'), 'items', after.item_count,
        'fresh_key', after.fresh_key, 'allow_fresh_key', allow_fresh_key, 'requested_by', after.requested_by,
        'requested_db_role', after.requested_db_role, 'approval_expires_at', after.approval_expires_at)
        || CASE WHEN signed_note IS NOT NULL THEN jsonb_build_object('signed_statement', signed_note) ELSE '{}' END);
END
$$;


--
-- Name: replay_run_acked_after_cancel(text, bigint, bigint[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    ids bigint[];
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF st <> 'cancelled' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s, not cancelled: its confirmed items are recorded as they are confirmed', request, st));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    SELECT coalesce(array_agg(i.dead_letter_id ORDER BY i.dead_letter_id), '{}') INTO ids
      FROM expiryctl.replay_items i JOIN expiryctl.replay_requests r ON r.id = i.request_id
     WHERE i.request_id = request AND i.dead_letter_id = ANY (acked) AND i.state = 'publishing'
       AND r.status = 'cancelled';
    UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE dead_letter_id = ANY (ids) AND status = 'dead';
    PERFORM expiryctl.audit_write(label, 'replay.run.cancelled', 'replay_request:' || request, jsonb_build_object(
        'published_before_cancel_seen', to_jsonb(ids),
        'note', 'published and acked while the cancel committed; their letters are marked replayed'));
END
$$;


--
-- Name: replay_run_acquire(bigint, text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_acquire(request bigint, application text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '10s'
    AS $$
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    PERFORM 1 FROM expiryctl.replay_requests WHERE id = request;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    INSERT INTO expiryctl.replay_runner_leases AS l (request_id, pid, login, application)
    VALUES (request, pg_backend_pid(), session_user, coalesce(left(application, 63), ''))
    ON CONFLICT (request_id) DO UPDATE
       SET pid = excluded.pid, login = excluded.login, application = excluded.application, taken_at = now()
     WHERE l.pid = pg_backend_pid()
        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.pid AND a.usename = l.login);
    RETURN FOUND;
END
$$;


--
-- Name: replay_run_captures(text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_captures(queues text[]) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT EXISTS (
        SELECT 1 FROM expiryctl.replay_runner_leases l
          JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
          JOIN expiryctl.replay_requests r ON r.id = l.request_id
         WHERE l.login = session_user AND r.kind = 'replay' AND r.status IN ('approved', 'running')
           AND NOT EXISTS (SELECT 1 FROM unnest(queues) AS q(name)
                            WHERE NOT EXISTS (SELECT 1 FROM expiryctl.replay_items i
                                                JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
                                               WHERE i.request_id = r.id AND d.source_queue = q.name)))
$$;


--
-- Name: replay_run_complete(text, bigint, jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    st text;
    open_n integer;
    outcome jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    SELECT count(*) FILTER (WHERE state IN ('pending', 'publishing')),
           jsonb_build_object(
               'confirmed', coalesce(jsonb_agg(dead_letter_id ORDER BY ordinal) FILTER (WHERE state = 'confirmed'), '[]'),
               'skipped', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'skipped'), '[]'),
               'failed', coalesce(jsonb_agg(jsonb_build_object('dead_letter_id', dead_letter_id, 'state', state,
                                   'reason', coalesce(last_error, '')) ORDER BY ordinal) FILTER (WHERE state = 'failed'), '[]'))
      INTO open_n, outcome
      FROM expiryctl.replay_items WHERE request_id = request;
    IF open_n > 0 THEN
        RAISE EXCEPTION 'replay request % still has % items not yet published: not completing it', request, open_n;
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'completed' WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.complete', 'replay_request:' || request, coalesce(details, '{}') || outcome);
    RETURN 'completed';
END
$$;


--
-- Name: replay_run_halt(text, bigint, text, bigint[], jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF st IS DISTINCT FROM 'running' THEN
        RETURN coalesce(st, 'missing');
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(unsent) > 0 THEN
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    UPDATE expiryctl.replay_requests SET status = 'halted', halt_reason = reason WHERE id = request;
    PERFORM expiryctl.audit_write(label, 'replay.halt', 'replay_request:' || request, details);
    RETURN 'halted';
END
$$;


--
-- Name: replay_run_interrupted(text, bigint, bigint[], jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    label text;
    st text;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT status INTO st FROM expiryctl.replay_requests WHERE id = request FOR SHARE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    IF st NOT IN ('running', 'cancelled') THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is %s: no run of it can have been interrupted', request, st));
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF cardinality(unsent) > 0 THEN
        UPDATE expiryctl.replay_items SET state = 'pending'
         WHERE request_id = request AND dead_letter_id = ANY (unsent) AND state = 'publishing';
    END IF;
    PERFORM expiryctl.audit_write(label, 'replay.run.interrupted', 'replay_request:' || request, details, 'error');
END
$$;


--
-- Name: replay_run_lease(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_lease(request bigint) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM expiryctl.replay_runner_leases l JOIN pg_stat_activity a ON a.pid = l.pid AND a.usename = l.login
                    WHERE l.request_id = request AND l.login = session_user) THEN
        PERFORM expiryctl.replay_refuse('single-runner', format(
            'no session of the login %s holds the runner lease of replay request %s: only its runner moves its items (`expiryctl replay run %s`)',
            session_user, request, request));
    END IF;
END
$$;


--
-- Name: replay_run_release(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_release(request bigint) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    DELETE FROM expiryctl.replay_runner_leases WHERE request_id = request AND pid = pg_backend_pid()
$$;


--
-- Name: replay_run_start(text, bigint, jsonb, jsonb); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb DEFAULT NULL::jsonb, dlq_watch jsonb DEFAULT NULL::jsonb) RETURNS TABLE(resumed boolean, label text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    req expiryctl.replay_requests%ROWTYPE;
    states jsonb;
    bound smallint := expiryctl.replay_publish_bound();
    spent jsonb;
BEGIN
    PERFORM expiryctl.require_role('replay run', 'expiryctl_operator');
    label := expiryctl.actor_label(actor);
    SELECT * INTO req FROM expiryctl.replay_requests WHERE id = request FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM expiryctl.not_found('replay_request', request);
    END IF;
    PERFORM expiryctl.replay_run_lease(request);
    IF req.kind = 'replay' AND req.status IN ('approved', 'running') AND NOT req.same_handler_ok THEN
        PERFORM expiryctl.replay_handler_check(request, req.failed_under, consumers);
    END IF;
    IF req.kind = 'replay' AND req.status IN ('approved', 'running') THEN
        PERFORM expiryctl.replay_dlq_watch_check(request, req.unwatched_why, dlq_watch);
    END IF;
    CASE req.status
    WHEN 'approved' THEN
        UPDATE expiryctl.replay_requests SET status = 'running', started_db_role = session_user WHERE id = request
        RETURNING * INTO req;
        resumed := false;
    WHEN 'running' THEN
        resumed := true;
    WHEN 'pending' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s is pending approval: ask an approver to run `expiryctl replay approve %s`', request, request));
    WHEN 'halted' THEN
        PERFORM expiryctl.replay_refuse('approved-to-run', format(
            'replay request %s was halted (%s): it needs a new approval before it runs again: ask an approver to run `expiryctl replay approve %s`',
            request, req.halt_reason, request));
    ELSE
        PERFORM expiryctl.replay_refuse('terminal', format(
            'replay request %s is %s: it is over and cannot run; make a new request with `expiryctl replay request`', request, req.status));
    END CASE;
    WITH failed AS (
        UPDATE expiryctl.replay_items i SET state = 'failed', last_error = format(
                   'sent to the broker up to %s times under replay request %s without a recorded answer, the most one request may (rule publish-bound): it is not published again; make a new request with `expiryctl replay request` to send its letter',
                   bound, request)
         WHERE i.request_id = request AND i.state IN ('pending', 'publishing') AND i.sends >= bound
           AND NOT EXISTS (SELECT 1 FROM expiryctl.dead_letters d JOIN expiryctl.queue_systems q ON q.name = d.source_system
                            WHERE d.id = i.dead_letter_id AND q.retries_in_place)
        RETURNING i.dead_letter_id, i.ordinal)
    SELECT jsonb_agg(dead_letter_id ORDER BY ordinal) INTO spent FROM failed;
    SELECT coalesce(jsonb_object_agg(state, n), '{}') INTO states
      FROM (SELECT state, count(*) AS n FROM expiryctl.replay_items WHERE request_id = request GROUP BY state) s;
    PERFORM expiryctl.audit_write(label, 'replay.run.start', 'replay_request:' || request, jsonb_build_object(
        'resume', resumed, 'approval', req.approvals, 'approved_by', req.reviewed_by,
        'approved_db_role', req.reviewed_db_role, 'kind', req.kind, 'items', req.item_count, 'states', states,
        'rate', req.rate, 'canary', req.canary, 'fresh_key', req.fresh_key,
        'same_handler_ok', req.same_handler_ok, 'failed_under', req.failed_under, 'consumers', consumers,
        'dlq_watch', dlq_watch, 'unwatched_why', req.unwatched_why,
        'stop_conditions', jsonb_build_object('failure_ratio', req.stop_failure_ratio, 'queue_depth', req.stop_queue_depth,
            'redead_ratio', req.stop_redead_ratio, 'canary_window_seconds', extract(epoch FROM req.canary_window)))
        || CASE WHEN spent IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('publish_bound', bound, 'publish_bound_failed', spent) END);
    RETURN NEXT;
END
$$;


--
-- Name: replay_run_watch_owed(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_run_watch_owed(request bigint) RETURNS TABLE(confirmed integer, came_back integer, window_left interval)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH run_items AS (
        SELECT i.dead_letter_id, i.confirmed_at, r.canary_window
          FROM expiryctl.replay_requests r
          JOIN expiryctl.replay_items i ON i.request_id = r.id
         WHERE r.id = request AND i.state = 'confirmed' AND i.confirmed_at >= r.reviewed_at)
    SELECT (SELECT count(*)::integer FROM run_items),
           (SELECT count(*)::integer FROM expiryctl.dead_letters n
              JOIN run_items ri ON ri.dead_letter_id = n.previous_id
             WHERE n.replay_request_id = request),
           coalesce((SELECT greatest(max(confirmed_at + canary_window) - now(), interval '0') FROM run_items),
                    interval '0')
$$;


--
-- Name: replay_target_of(text, text, text, text, text, text, boolean); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) RETURNS TABLE(e text, rk text)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
    SELECT CASE WHEN j.in_place THEN ''
                WHEN via_exchange AND (original_exchange IS NOT NULL OR original_routing_key IS NOT NULL) THEN coalesce(original_exchange, '')
                WHEN coalesce(origin_queue, '') OPERATOR(pg_catalog.<>) '' THEN ''
                WHEN coalesce(to_exchange, '') OPERATOR(pg_catalog.<>) '' OR coalesce(to_routing_key, '') OPERATOR(pg_catalog.<>) ''
                    THEN coalesce(to_exchange, '')
                WHEN source_queue OPERATOR(pg_catalog.~) '.\.dlq$' THEN '' END,
           CASE WHEN j.in_place THEN source_queue
                WHEN via_exchange AND (original_exchange IS NOT NULL OR original_routing_key IS NOT NULL) THEN coalesce(original_routing_key, '')
                WHEN coalesce(origin_queue, '') OPERATOR(pg_catalog.<>) '' THEN expiryctl.work_queue_of(origin_queue)
                WHEN coalesce(to_exchange, '') OPERATOR(pg_catalog.<>) '' OR coalesce(to_routing_key, '') OPERATOR(pg_catalog.<>) ''
                    THEN coalesce(to_routing_key, '')
                WHEN source_queue OPERATOR(pg_catalog.~) '.\.dlq$' THEN expiryctl.work_queue_of(source_queue) END
      FROM (SELECT EXISTS (SELECT FROM expiryctl.queue_systems s
                            WHERE s.retries_in_place AND s.queue_prefix OPERATOR(pg_catalog.<>) ''
                              AND pg_catalog.starts_with(source_queue, s.queue_prefix)) AS in_place) j
$_$;


--
-- Name: replay_watched_queues(bigint); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.replay_watched_queues(request bigint) RETURNS SETOF text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT DISTINCT d.source_queue
      FROM expiryctl.replay_requests r
      JOIN expiryctl.replay_items i ON i.request_id = r.id
      JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
     WHERE r.id = request
       AND (i.state IN ('pending', 'publishing')
            OR (i.state = 'confirmed' AND i.confirmed_at >= r.reviewed_at
                AND i.confirmed_at + r.canary_window > now()))
     ORDER BY 1
$$;


--
-- Name: require_role(text, text[]); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.require_role(action text, VARIADIC groups text[]) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NOT expiryctl.caller_in(VARIADIC groups) THEN
        PERFORM expiryctl.replay_refuse('role', format(
            '%s needs membership of %s, and the login %s has none: ask the schema owner to run `expiryctl access grant %s %s`',
            action, array_to_string(groups, ' or '), session_user, session_user, groups[1]));
    END IF;
END
$$;


--
-- Name: retry_after_of(jsonb, timestamp with time zone); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.retry_after_of(headers jsonb, at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;


--
-- Name: tally_dead_letter_signals(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.tally_dead_letter_signals() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- As in tally_dead_letters: each change is a -1 for an old row and a +1
    -- for a new one, summed per key and upserted in key order, so that
    -- concurrent writers lock tally rows in the same order and cannot
    -- deadlock. An UPDATE that moves no key (a redaction) writes nothing.
    -- A transition table exists only for the events that have it, hence a
    -- branch per event.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*)
        FROM new_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, count(*)
        FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_arrival_tallies AS t (dead_hour, reason_category, letters)
        SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, count(*)
        FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (dead_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, sum(delta)
        FROM (SELECT reason_category, error_class, status, attempts, -1 AS delta FROM old_rows
              UNION ALL
              SELECT reason_category, error_class, status, attempts, 1 FROM new_rows) AS changes
        GROUP BY 1, 2, 3, 4 HAVING sum(delta) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, sum(delta)
        FROM (SELECT due_at, reason_category, -1 AS delta FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
              UNION ALL
              SELECT due_at, reason_category, 1 FROM new_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL) AS changes
        GROUP BY 1, 2 HAVING sum(delta) <> 0 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
        -- No arrival tally moves on an UPDATE: it counts by dead_lettered_at
        -- and reason_category, which dead_letter_states_frozen refuses to
        -- change, so summing the old and new rows (a time zone conversion
        -- each, for every replayed or requested letter) only ever gave 0.
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO expiryctl.dead_letter_class_tallies AS t (reason_category, error_class, status, attempts, letters)
        SELECT reason_category, coalesce(error_class, ''), status, attempts, -count(*)
        FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (reason_category, error_class, status, attempts)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_due_tallies AS t (due_hour, reason_category, letters)
        SELECT date_trunc('hour', due_at, 'UTC'), reason_category, -count(*)
        FROM old_rows WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (due_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;

        INSERT INTO expiryctl.dead_letter_arrival_tallies AS t (dead_hour, reason_category, letters)
        SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, -count(*)
        FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (dead_hour, reason_category)
        DO UPDATE SET letters = t.letters + excluded.letters;
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: tally_dead_letters(); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.tally_dead_letters() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Rows are upserted in key order so that concurrent writers lock tallies in
    -- the same order and cannot deadlock.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, sum(delta)
        FROM (SELECT reason_category, source_queue, status, -1 AS delta FROM old_rows
              UNION ALL
              SELECT reason_category, source_queue, status, 1 FROM new_rows) AS changes
        GROUP BY 1, 2, 3 HAVING sum(delta) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO expiryctl.dead_letter_tallies AS t (reason_category, source_queue, status, letters)
        SELECT reason_category, source_queue, status, -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (reason_category, source_queue, status)
        DO UPDATE SET letters = t.letters + excluded.letters;
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: work_queue_of(text); Type: FUNCTION; Schema: expiryctl
--

CREATE FUNCTION expiryctl.work_queue_of(queue text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(NULLIF(regexp_replace(queue, '(\.retry\.[0-9]+|\.dlq)$'::text, ''::text), ''::text), queue);


--
-- Name: audit_chain; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_chain (
);


--
-- Name: TABLE audit_chain; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.audit_chain IS 'Locked (never written) by the functions that append to audit_log, so that rows are numbered and chained one transaction at a time.';


--
-- Name: audit_checkpoints; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_checkpoints (
    id bigint NOT NULL,
    tree_size bigint NOT NULL,
    root_hash bytea NOT NULL,
    signed_note text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by text DEFAULT SESSION_USER NOT NULL,
    CONSTRAINT audit_checkpoints_root_hash_check CHECK ((length(root_hash) = 32)),
    CONSTRAINT audit_checkpoints_tree_size_check CHECK ((tree_size >= 0))
);


--
-- Name: audit_checkpoints_id_seq; Type: SEQUENCE; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_checkpoints ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME expiryctl.audit_checkpoints_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: audit_count_leaves; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_count_leaves (
    field text NOT NULL,
    value text NOT NULL,
    bucket integer NOT NULL,
    rows bigint NOT NULL,
    newest bigint NOT NULL,
    CONSTRAINT audit_count_leaves_bucket_check CHECK (((bucket >= 0) AND (bucket <= 65535))),
    CONSTRAINT audit_count_leaves_field_check CHECK ((field = ANY (ARRAY['action'::text, 'actor'::text, 'target'::text]))),
    CONSTRAINT audit_count_leaves_newest_check CHECK ((newest > 0)),
    CONSTRAINT audit_count_leaves_rows_check CHECK ((rows > 0))
);


--
-- Name: TABLE audit_count_leaves; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.audit_count_leaves IS 'How many of the first audit_trail.counts_size audit rows hold each value of action, actor and target, and the newest of them (docs/audit.md, complete filtered exports)';


--
-- Name: audit_count_tree; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_count_tree (
    level smallint NOT NULL,
    n integer NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT audit_count_tree_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT audit_count_tree_level_check CHECK (((level >= 0) AND (level <= 16))),
    CONSTRAINT audit_count_tree_n_check CHECK (((n >= 0) AND (n < (65536 >> (level)::integer))))
);


--
-- Name: TABLE audit_count_tree; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.audit_count_tree IS 'The count tree''s hashes, level 0 the buckets'' record hashes, level 16 the root; a node under which no leaf falls is not stored';


--
-- Name: audit_log; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_log (
    at timestamp with time zone DEFAULT expiryctl.audit_next_at() NOT NULL,
    actor text NOT NULL,
    db_role text DEFAULT SESSION_USER NOT NULL,
    action text NOT NULL,
    target text DEFAULT ''::text NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    outcome text NOT NULL,
    seq bigint DEFAULT expiryctl.audit_next_seq() NOT NULL,
    prev_hash bytea DEFAULT expiryctl.audit_next_prev_hash() NOT NULL,
    hash bytea GENERATED ALWAYS AS (sha256(((((((((((((((int8send(seq) || int8send(((EXTRACT(epoch FROM (at - '1970-01-01 00:00:00+00'::timestamp with time zone)) * (1000000)::numeric))::bigint)) || int4send(octet_length(actor))) || decode(replace(actor, '\'::text, '\\'::text), 'escape'::text)) || int4send(octet_length(db_role))) || decode(replace(db_role, '\'::text, '\\'::text), 'escape'::text)) || int4send(octet_length(action))) || decode(replace(action, '\'::text, '\\'::text), 'escape'::text)) || int4send(octet_length(target))) || decode(replace(target, '\'::text, '\\'::text), 'escape'::text)) || int4send(octet_length((details)::text))) || decode(replace((details)::text, '\'::text, '\\'::text), 'escape'::text)) || int4send(octet_length(outcome))) || decode(replace(outcome, '\'::text, '\\'::text), 'escape'::text)) || prev_hash))) STORED NOT NULL
);


--
-- Name: TABLE audit_log; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.audit_log IS 'Every expiryctl action, reads included: who, as which database role, did what to which target, and how it ended.';


--
-- Name: audit_trail; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_trail (
    singleton boolean DEFAULT true NOT NULL,
    origin text,
    tree_size bigint DEFAULT 0 NOT NULL,
    counts_size bigint DEFAULT 0 NOT NULL,
    CONSTRAINT audit_trail_counts_size_check CHECK ((counts_size >= 0)),
    CONSTRAINT audit_trail_singleton_check CHECK (singleton),
    CONSTRAINT audit_trail_tree_size_check CHECK ((tree_size >= 0))
);


--
-- Name: audit_tree; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.audit_tree (
    idx bigint NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT audit_tree_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT audit_tree_idx_check CHECK ((idx >= 0))
);


--
-- Name: TABLE audit_tree; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.audit_tree IS 'tlog stored hashes of the audit trail (index tlog.StoredHashIndex); the first audit_trail.tree_size rows are in it';


--
-- Name: dead_letter_arrival_tallies; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letter_arrival_tallies (
    dead_hour timestamp with time zone NOT NULL,
    reason_category text NOT NULL,
    letters bigint NOT NULL
);


--
-- Name: TABLE dead_letter_arrival_tallies; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.dead_letter_arrival_tallies IS 'Letters per UTC hour of dead_lettered_at and category, kept by dead_letter_states'' statement triggers.';


--
-- Name: dead_letter_class_tallies; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letter_class_tallies (
    reason_category text NOT NULL,
    error_class text NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL,
    letters bigint NOT NULL
);


--
-- Name: TABLE dead_letter_class_tallies; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.dead_letter_class_tallies IS 'Letters per category, error class, status and attempts, kept by dead_letter_states'' statement triggers.';


--
-- Name: dead_letter_due_tallies; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letter_due_tallies (
    due_hour timestamp with time zone NOT NULL,
    letters bigint NOT NULL,
    reason_category text NOT NULL
);


--
-- Name: TABLE dead_letter_due_tallies; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.dead_letter_due_tallies IS 'Waiting letters (dead or in_request) per UTC hour of due_at and reason category, kept by dead_letter_states'' statement triggers.';


--
-- Name: dead_letter_states; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letter_states (
    dead_letter_id bigint NOT NULL,
    status text DEFAULT 'dead'::text NOT NULL,
    reason_category text NOT NULL,
    source_queue text NOT NULL,
    error_class text,
    attempts integer NOT NULL,
    dead_lettered_at timestamp with time zone NOT NULL,
    due_at timestamp with time zone,
    CONSTRAINT dead_letter_states_status_check CHECK ((status = ANY (ARRAY['dead'::text, 'in_request'::text, 'replayed'::text, 'discarded'::text])))
);


--
-- Name: TABLE dead_letter_states; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.dead_letter_states IS 'What became of each dead letter (its status), with the captured columns its waiting indexes and tallies are keyed on; one row per dead_letters row, made by dead_letters_track_state.';


--
-- Name: dead_letter_tallies; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.dead_letter_tallies (
    reason_category text NOT NULL,
    source_queue text NOT NULL,
    status text NOT NULL,
    letters bigint NOT NULL
);


--
-- Name: dead_letters_id_seq; Type: SEQUENCE; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letters ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME expiryctl.dead_letters_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: policy; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.policy (
    singleton boolean DEFAULT true NOT NULL,
    approvers text[] DEFAULT '{}'::text[] NOT NULL,
    max_cohort integer DEFAULT 500 NOT NULL,
    max_rate numeric DEFAULT 50 NOT NULL,
    approval_ttl interval DEFAULT '01:00:00'::interval NOT NULL,
    stop_failure_ratio numeric DEFAULT 0.05 NOT NULL,
    stop_queue_depth integer DEFAULT 10000 NOT NULL,
    stop_redead_ratio numeric DEFAULT 0.2 NOT NULL,
    canary_window interval DEFAULT '00:00:30'::interval NOT NULL,
    identity_mode text DEFAULT 'declared'::text NOT NULL,
    eligibility_query text DEFAULT ''::text NOT NULL,
    retention interval DEFAULT '90 days'::interval NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text DEFAULT 'migration'::text NOT NULL,
    outcome_query text DEFAULT ''::text NOT NULL,
    outcome_window interval DEFAULT '00:05:00'::interval NOT NULL,
    stop_unsettled_ratio numeric DEFAULT 0.05 NOT NULL,
    stop_conflict_ratio numeric DEFAULT 0.2 NOT NULL,
    signed_approvals boolean DEFAULT false NOT NULL,
    gap_query text DEFAULT ''::text NOT NULL,
    job_tables jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT policy_approval_ttl_check CHECK ((approval_ttl > '00:00:00'::interval)),
    CONSTRAINT policy_canary_window_check CHECK ((canary_window >= '00:00:00'::interval)),
    CONSTRAINT policy_identity_mode_check CHECK ((identity_mode = ANY (ARRAY['declared'::text, 'db-role'::text]))),
    CONSTRAINT policy_job_tables_by_name CHECK ((jsonb_typeof(job_tables) = 'object'::text)),
    CONSTRAINT policy_max_cohort_check CHECK ((max_cohort > 0)),
    CONSTRAINT policy_max_rate_check CHECK ((max_rate > (0)::numeric)),
    CONSTRAINT policy_outcome_window_check CHECK ((outcome_window > '00:00:00'::interval)),
    CONSTRAINT policy_retention_check CHECK ((retention > '00:00:00'::interval)),
    CONSTRAINT policy_singleton_check CHECK (singleton),
    CONSTRAINT policy_stop_conflict_ratio_check CHECK (((stop_conflict_ratio >= (0)::numeric) AND (stop_conflict_ratio <= (1)::numeric))),
    CONSTRAINT policy_stop_failure_ratio_check CHECK (((stop_failure_ratio >= (0)::numeric) AND (stop_failure_ratio <= (1)::numeric))),
    CONSTRAINT policy_stop_queue_depth_check CHECK ((stop_queue_depth > 0)),
    CONSTRAINT policy_stop_redead_ratio_check CHECK (((stop_redead_ratio >= (0)::numeric) AND (stop_redead_ratio <= (1)::numeric))),
    CONSTRAINT policy_stop_unsettled_ratio_check CHECK (((stop_unsettled_ratio >= (0)::numeric) AND (stop_unsettled_ratio <= (1)::numeric)))
);


--
-- Name: policy_changes; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.policy_changes (
    id bigint NOT NULL,
    changes jsonb NOT NULL,
    why text DEFAULT ''::text NOT NULL,
    proposed_by text NOT NULL,
    proposed_db_role text DEFAULT SESSION_USER NOT NULL,
    proposed_at timestamp with time zone DEFAULT now() NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    reviewed_by text,
    reviewed_db_role text,
    reviewed_at timestamp with time zone,
    CONSTRAINT policy_changes_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'applied'::text, 'rejected'::text]))),
    CONSTRAINT policy_four_eyes CHECK (((reviewed_db_role IS NULL) OR (reviewed_db_role <> proposed_db_role)))
);


--
-- Name: policy_changes_id_seq; Type: SEQUENCE; Schema: expiryctl
--

ALTER TABLE expiryctl.policy_changes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME expiryctl.policy_changes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: queue_systems; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.queue_systems (
    name text NOT NULL,
    queue_prefix text NOT NULL,
    retries_in_place boolean NOT NULL,
    names_connection_in_queue boolean NOT NULL,
    default_connection text,
    consumers_unseen text,
    CONSTRAINT queue_systems_consumers_unseen_check CHECK (((consumers_unseen ~ '\S'::text) AND (char_length(consumers_unseen) <= 300) AND (consumers_unseen !~ '[\x01-\x1f\x7f-\x9f]'::text))),
    CONSTRAINT queue_systems_default_connection_check CHECK ((default_connection ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'::text)),
    CONSTRAINT queue_systems_name_check CHECK ((name ~ '^[a-z][a-z0-9_]{0,62}$'::text)),
    CONSTRAINT queue_systems_one_connection_source CHECK (((default_connection IS NULL) = names_connection_in_queue)),
    CONSTRAINT queue_systems_queue_prefix_check CHECK ((queue_prefix ~ '^[!-~]{0,64}$'::text)),
    CONSTRAINT queue_systems_told_by_prefix CHECK (((queue_prefix <> ''::text) OR (NOT (retries_in_place OR names_connection_in_queue))))
);


--
-- Name: TABLE queue_systems; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.queue_systems IS 'The queue systems the archive takes letters of, one a driver, registered by `expiryctl migrate`; a row that letters reference is never deleted.';


--
-- Name: COLUMN queue_systems.name; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.name IS 'The name letters carry in dead_letters.source_system.';


--
-- Name: COLUMN queue_systems.queue_prefix; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.queue_prefix IS 'How the system''s queue names begin; empty for the one system whose queue names are plain. No prefix begins another.';


--
-- Name: COLUMN queue_systems.retries_in_place; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.retries_in_place IS 'A replay retries the failed job where the system keeps it, in the queue it was captured from, rather than publishing a copy (a job store).';


--
-- Name: COLUMN queue_systems.names_connection_in_queue; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.names_connection_in_queue IS 'A letter''s queue name is queue_prefix || connection || ''/…''.';


--
-- Name: COLUMN queue_systems.default_connection; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.default_connection IS 'The connection a letter captured without one names; NULL when its queue''s name gives it.';


--
-- Name: COLUMN queue_systems.consumers_unseen; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.queue_systems.consumers_unseen IS 'Why the system shows nobody consuming a queue, or not which handler version each consumer runs, so that a replay''s handler check cannot verify a fixed handler and its request must vouch for the handler (rule handler-unseen); NULL when its consumers say their versions.';


--
-- Name: replay_items; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.replay_items (
    request_id bigint NOT NULL,
    dead_letter_id bigint NOT NULL,
    ordinal integer NOT NULL,
    payload_sha256 bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    confirmed_at timestamp with time zone,
    open boolean DEFAULT true NOT NULL,
    sends smallint DEFAULT 0 NOT NULL,
    retry_after timestamp with time zone,
    CONSTRAINT replay_items_publish_bound CHECK (((sends >= 0) AND (sends <= 3))),
    CONSTRAINT replay_items_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'publishing'::text, 'confirmed'::text, 'failed'::text, 'skipped'::text])))
)
WITH (fillfactor='50');


--
-- Name: replay_outcomes; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.replay_outcomes (
    request_id bigint NOT NULL,
    dead_letter_id bigint NOT NULL,
    approval integer NOT NULL,
    published_at timestamp with time zone NOT NULL,
    confirmed_at timestamp with time zone NOT NULL,
    window_ends_at timestamp with time zone NOT NULL,
    terminal_at timestamp with time zone,
    duplicate boolean DEFAULT false NOT NULL,
    observed_at timestamp with time zone DEFAULT now() NOT NULL,
    recorded_db_role text DEFAULT SESSION_USER NOT NULL,
    latency interval GENERATED ALWAYS AS (GREATEST((terminal_at - published_at), '00:00:00'::interval)) STORED,
    CONSTRAINT replay_outcomes_times CHECK (((confirmed_at >= published_at) AND (window_ends_at >= confirmed_at)))
);


--
-- Name: TABLE replay_outcomes; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.replay_outcomes IS 'What the policy''s outcome query said of each item a run confirmed; written only by replay_outcomes_record.';


--
-- Name: replay_requests; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.replay_requests (
    id bigint NOT NULL,
    kind text NOT NULL,
    filter jsonb DEFAULT '{}'::jsonb NOT NULL,
    item_count integer NOT NULL,
    cohort_hash bytea NOT NULL,
    rate numeric NOT NULL,
    canary integer DEFAULT 1 NOT NULL,
    stop_failure_ratio numeric NOT NULL,
    stop_queue_depth integer NOT NULL,
    stop_redead_ratio numeric NOT NULL,
    canary_window interval NOT NULL,
    fresh_key boolean DEFAULT false NOT NULL,
    eligibility_confirmed boolean DEFAULT false NOT NULL,
    to_exchange text,
    to_routing_key text,
    why text NOT NULL,
    requested_by text NOT NULL,
    requested_db_role text DEFAULT SESSION_USER NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    reviewed_by text,
    reviewed_db_role text,
    reviewed_at timestamp with time zone,
    review_why text,
    approval_spent boolean DEFAULT false NOT NULL,
    approval_expires_at timestamp with time zone,
    approvals integer DEFAULT 0 NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    halt_reason text,
    started_db_role text,
    same_handler_ok boolean DEFAULT false NOT NULL,
    same_handler_why text,
    include_permanent boolean DEFAULT false NOT NULL,
    failed_under jsonb DEFAULT '{}'::jsonb NOT NULL,
    targets jsonb DEFAULT '[]'::jsonb NOT NULL,
    approval_note text,
    via_exchange boolean DEFAULT false NOT NULL,
    not_before timestamp with time zone,
    include_not_due boolean DEFAULT false NOT NULL,
    unwatched_why text,
    CONSTRAINT four_eyes CHECK (((reviewed_by IS NULL) OR (reviewed_by <> requested_by))),
    CONSTRAINT four_eyes_db_role CHECK (((reviewed_db_role IS NULL) OR (reviewed_db_role <> requested_db_role) OR (reviewed_by <> requested_by))),
    CONSTRAINT replay_requests_canary_check CHECK ((canary >= 0)),
    CONSTRAINT replay_requests_check CHECK (((fresh_key = false) OR eligibility_confirmed)),
    CONSTRAINT replay_requests_check1 CHECK (((fresh_key = false) OR (kind = 'replay'::text))),
    CONSTRAINT replay_requests_item_count_check CHECK ((item_count > 0)),
    CONSTRAINT replay_requests_kind_check CHECK ((kind = ANY (ARRAY['replay'::text, 'discard'::text]))),
    CONSTRAINT replay_requests_rate_check CHECK ((rate > (0)::numeric)),
    CONSTRAINT replay_requests_same_handler_why CHECK (((NOT same_handler_ok) OR (length(btrim(COALESCE(same_handler_why, ''::text))) > 0))),
    CONSTRAINT replay_requests_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'approved'::text, 'rejected'::text, 'expired'::text, 'running'::text, 'halted'::text, 'completed'::text, 'cancelled'::text]))),
    CONSTRAINT replay_requests_unwatched_why CHECK (((unwatched_why IS NULL) OR (btrim(unwatched_why) <> ''::text))),
    CONSTRAINT replay_requests_why_check CHECK ((length(btrim(why)) > 0))
);


--
-- Name: COLUMN replay_requests.same_handler_ok; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.replay_requests.same_handler_ok IS 'The requester says the handler version that failed the cohort may take it again (with same_handler_why); set only by replay_request_create';


--
-- Name: COLUMN replay_requests.include_permanent; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.replay_requests.include_permanent IS 'The requester includes letters that failed for good (conflict, validation, malformed, not-found); set only by replay_request_create';


--
-- Name: COLUMN replay_requests.failed_under; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.replay_requests.failed_under IS 'Letters of the cohort per x-handler-version ("" for none), frozen with the cohort';


--
-- Name: COLUMN replay_requests.targets; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.replay_requests.targets IS 'Where the cohort''s letters are published: [{exchange, routing_key, letters}], the 20 largest, frozen with the cohort';


--
-- Name: COLUMN replay_requests.approval_note; Type: COMMENT; Schema: expiryctl
--

COMMENT ON COLUMN expiryctl.replay_requests.approval_note IS 'The approver''s signed statement of what they approved (a signed note), or NULL for an unsigned approval.';


--
-- Name: replay_requests_id_seq; Type: SEQUENCE; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_requests ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME expiryctl.replay_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: replay_runner_leases; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.replay_runner_leases (
    request_id bigint NOT NULL,
    pid integer NOT NULL,
    login name NOT NULL,
    application text DEFAULT ''::text NOT NULL,
    taken_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: TABLE replay_runner_leases; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.replay_runner_leases IS 'Who runs each request: the session (pid, login) that took the lease through replay_run_acquire; written only by the schema''s functions.';


--
-- Name: schema_definitions; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.schema_definitions (
    kind text NOT NULL,
    name text NOT NULL,
    sha256 bytea NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_definitions_kind_check CHECK ((kind = ANY (ARRAY['function'::text, 'view'::text]))),
    CONSTRAINT schema_definitions_sha256_check CHECK ((length(sha256) = 32))
);


--
-- Name: TABLE schema_definitions; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.schema_definitions IS 'The form of each file of store/functions/ (and views/) this database runs, by sha256; written by expiryctl migrate.';


--
-- Name: schema_definitions_before; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.schema_definitions_before (
    signature text NOT NULL,
    definition text NOT NULL,
    acl aclitem[],
    description text
);


--
-- Name: TABLE schema_definitions_before; Type: COMMENT; Schema: expiryctl
--

COMMENT ON TABLE expiryctl.schema_definitions_before IS 'The schema''s functions as migration 00020 left them, for the Down of 00021.';


--
-- Name: schema_migrate_lock; Type: TABLE; Schema: expiryctl
--

CREATE TABLE expiryctl.schema_migrate_lock (
    lock_id bigint NOT NULL,
    locked boolean DEFAULT false NOT NULL,
    locked_at timestamp with time zone,
    locked_by text,
    lease_expires_at timestamp with time zone,
    updated_at timestamp with time zone
);


--
-- Name: audit_checkpoints audit_checkpoints_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_checkpoints
    ADD CONSTRAINT audit_checkpoints_pkey PRIMARY KEY (id);


--
-- Name: audit_count_leaves audit_count_leaves_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_count_leaves
    ADD CONSTRAINT audit_count_leaves_pkey PRIMARY KEY (field, value);


--
-- Name: audit_count_tree audit_count_tree_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_count_tree
    ADD CONSTRAINT audit_count_tree_pkey PRIMARY KEY (level, n);


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq);


--
-- Name: audit_trail audit_trail_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_trail
    ADD CONSTRAINT audit_trail_pkey PRIMARY KEY (singleton);


--
-- Name: audit_tree audit_tree_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.audit_tree
    ADD CONSTRAINT audit_tree_pkey PRIMARY KEY (idx);


--
-- Name: dead_letter_arrival_tallies dead_letter_arrival_tallies_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letter_arrival_tallies
    ADD CONSTRAINT dead_letter_arrival_tallies_pkey PRIMARY KEY (dead_hour, reason_category);


--
-- Name: dead_letter_class_tallies dead_letter_class_tallies_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letter_class_tallies
    ADD CONSTRAINT dead_letter_class_tallies_pkey PRIMARY KEY (reason_category, error_class, status, attempts);


--
-- Name: dead_letter_due_tallies dead_letter_due_tallies_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letter_due_tallies
    ADD CONSTRAINT dead_letter_due_tallies_pkey PRIMARY KEY (due_hour, reason_category);


--
-- Name: dead_letter_states dead_letter_states_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letter_states
    ADD CONSTRAINT dead_letter_states_pkey PRIMARY KEY (dead_letter_id) INCLUDE (status);


--
-- Name: dead_letter_tallies dead_letter_tallies_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letter_tallies
    ADD CONSTRAINT dead_letter_tallies_pkey PRIMARY KEY (reason_category, source_queue, status);


--
-- Name: dead_letters dead_letters_fingerprint_key; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letters
    ADD CONSTRAINT dead_letters_fingerprint_key UNIQUE (fingerprint);


--
-- Name: dead_letters dead_letters_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (id);


--
-- Name: replay_requests four_eyes_login; Type: CHECK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_requests
    ADD CONSTRAINT four_eyes_login CHECK (((reviewed_db_role IS NULL) OR (reviewed_db_role <> requested_db_role))) NOT VALID;


--
-- Name: policy_changes policy_changes_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.policy_changes
    ADD CONSTRAINT policy_changes_pkey PRIMARY KEY (id);


--
-- Name: policy policy_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.policy
    ADD CONSTRAINT policy_pkey PRIMARY KEY (singleton);


--
-- Name: queue_systems queue_systems_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.queue_systems
    ADD CONSTRAINT queue_systems_pkey PRIMARY KEY (name);


--
-- Name: queue_systems queue_systems_queue_prefix_key; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.queue_systems
    ADD CONSTRAINT queue_systems_queue_prefix_key UNIQUE (queue_prefix);


--
-- Name: replay_items replay_items_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_items
    ADD CONSTRAINT replay_items_pkey PRIMARY KEY (request_id, dead_letter_id);


--
-- Name: replay_items replay_items_request_id_ordinal_key; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_items
    ADD CONSTRAINT replay_items_request_id_ordinal_key UNIQUE (request_id, ordinal);


--
-- Name: replay_outcomes replay_outcomes_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_outcomes
    ADD CONSTRAINT replay_outcomes_pkey PRIMARY KEY (request_id, dead_letter_id);


--
-- Name: replay_requests replay_requests_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_requests
    ADD CONSTRAINT replay_requests_pkey PRIMARY KEY (id);


--
-- Name: replay_runner_leases replay_runner_leases_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_runner_leases
    ADD CONSTRAINT replay_runner_leases_pkey PRIMARY KEY (request_id);


--
-- Name: schema_definitions_before schema_definitions_before_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.schema_definitions_before
    ADD CONSTRAINT schema_definitions_before_pkey PRIMARY KEY (signature);


--
-- Name: schema_definitions schema_definitions_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.schema_definitions
    ADD CONSTRAINT schema_definitions_pkey PRIMARY KEY (kind, name);


--
-- Name: schema_migrate_lock schema_migrate_lock_pkey; Type: CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.schema_migrate_lock
    ADD CONSTRAINT schema_migrate_lock_pkey PRIMARY KEY (lock_id);


--
-- Name: audit_count_leaves_bucket; Type: INDEX; Schema: expiryctl
--

CREATE INDEX audit_count_leaves_bucket ON expiryctl.audit_count_leaves USING btree (bucket);


--
-- Name: audit_log_action; Type: INDEX; Schema: expiryctl
--

CREATE INDEX audit_log_action ON expiryctl.audit_log USING btree (action, seq DESC);


--
-- Name: audit_log_actor; Type: INDEX; Schema: expiryctl
--

CREATE INDEX audit_log_actor ON expiryctl.audit_log USING btree (actor, seq DESC);


--
-- Name: audit_log_at; Type: INDEX; Schema: expiryctl
--

CREATE INDEX audit_log_at ON expiryctl.audit_log USING btree (at);


--
-- Name: audit_log_target; Type: INDEX; Schema: expiryctl
--

CREATE INDEX audit_log_target ON expiryctl.audit_log USING btree (target, seq DESC);


--
-- Name: dead_letter_states_outstanding_oldest; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letter_states_outstanding_oldest ON expiryctl.dead_letter_states USING btree (reason_category, dead_lettered_at) WHERE (status = ANY (ARRAY['dead'::text, 'in_request'::text]));


--
-- Name: dead_letter_states_waiting_due; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letter_states_waiting_due ON expiryctl.dead_letter_states USING btree (due_at) INCLUDE (reason_category) WHERE ((status = ANY (ARRAY['dead'::text, 'in_request'::text])) AND (due_at IS NOT NULL));


--
-- Name: dead_letters_category_newest; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letters_category_newest ON expiryctl.dead_letters USING btree (reason_category, dead_lettered_at DESC, id DESC);


--
-- Name: dead_letters_job; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letters_job ON expiryctl.dead_letters USING btree (job_key, id DESC);


--
-- Name: dead_letters_newest; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letters_newest ON expiryctl.dead_letters USING btree (dead_lettered_at DESC, id DESC);


--
-- Name: dead_letters_previous; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letters_previous ON expiryctl.dead_letters USING btree (previous_id) WHERE (previous_id IS NOT NULL);


--
-- Name: dead_letters_replay_request; Type: INDEX; Schema: expiryctl
--

CREATE INDEX dead_letters_replay_request ON expiryctl.dead_letters USING btree (replay_request_id) WHERE (replay_request_id IS NOT NULL);


--
-- Name: policy_changes_pending; Type: INDEX; Schema: expiryctl
--

CREATE INDEX policy_changes_pending ON expiryctl.policy_changes USING btree (id) WHERE (status = 'pending'::text);


--
-- Name: replay_items_one_open_request; Type: INDEX; Schema: expiryctl
--

CREATE UNIQUE INDEX replay_items_one_open_request ON expiryctl.replay_items USING btree (dead_letter_id) WHERE open;


--
-- Name: replay_items_open_by_request; Type: INDEX; Schema: expiryctl
--

CREATE INDEX replay_items_open_by_request ON expiryctl.replay_items USING btree (request_id) WHERE open;


--
-- Name: replay_requests_status; Type: INDEX; Schema: expiryctl
--

CREATE INDEX replay_requests_status ON expiryctl.replay_requests USING btree (status, id DESC);


--
-- Name: audit_checkpoints audit_checkpoints_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON expiryctl.audit_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_truncate;


--
-- Name: audit_checkpoints audit_checkpoints_no_update; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_checkpoints_no_update BEFORE DELETE OR UPDATE ON expiryctl.audit_checkpoints FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_update;


--
-- Name: audit_log audit_log_no_delete; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON expiryctl.audit_log FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_delete;


--
-- Name: audit_log audit_log_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON expiryctl.audit_log FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_truncate;


--
-- Name: audit_log audit_log_no_update; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON expiryctl.audit_log FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_no_update;


--
-- Name: audit_log audit_log_who_and_when; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_log_who_and_when BEFORE INSERT ON expiryctl.audit_log FOR EACH ROW WHEN (((new.db_role IS DISTINCT FROM SESSION_USER) OR (new.at < (statement_timestamp() - '00:00:01'::interval)) OR (new.at > (clock_timestamp() + '00:00:01'::interval)))) EXECUTE FUNCTION expiryctl.audit_refuse_forged();

ALTER TABLE expiryctl.audit_log ENABLE ALWAYS TRIGGER audit_log_who_and_when;


--
-- Name: audit_tree audit_tree_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_tree_no_truncate BEFORE TRUNCATE ON expiryctl.audit_tree FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_truncate;


--
-- Name: audit_tree audit_tree_no_update; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER audit_tree_no_update BEFORE DELETE OR UPDATE ON expiryctl.audit_tree FOR EACH ROW EXECUTE FUNCTION expiryctl.audit_refuse_change();

ALTER TABLE expiryctl.audit_tree ENABLE ALWAYS TRIGGER audit_tree_no_update;


--
-- Name: dead_letter_states dead_letter_states_frozen; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_frozen BEFORE UPDATE ON expiryctl.dead_letter_states FOR EACH ROW WHEN (((new.dead_letter_id IS DISTINCT FROM old.dead_letter_id) OR (new.reason_category IS DISTINCT FROM old.reason_category) OR (new.source_queue IS DISTINCT FROM old.source_queue) OR (new.error_class IS DISTINCT FROM old.error_class) OR (new.attempts IS DISTINCT FROM old.attempts) OR (new.dead_lettered_at IS DISTINCT FROM old.dead_lettered_at) OR (new.due_at IS DISTINCT FROM old.due_at))) EXECUTE FUNCTION expiryctl.dead_letter_states_refuse_change();


--
-- Name: dead_letter_states dead_letter_states_no_delete; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_no_delete BEFORE DELETE ON expiryctl.dead_letter_states FOR EACH ROW EXECUTE FUNCTION expiryctl.dead_letter_states_refuse_change();


--
-- Name: dead_letter_states dead_letter_states_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_no_truncate BEFORE TRUNCATE ON expiryctl.dead_letter_states FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();


--
-- Name: dead_letter_states dead_letter_states_signal_tally_insert; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_signal_tally_insert AFTER INSERT ON expiryctl.dead_letter_states REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();


--
-- Name: dead_letter_states dead_letter_states_signal_tally_update; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_signal_tally_update AFTER UPDATE ON expiryctl.dead_letter_states REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letter_signals();


--
-- Name: dead_letter_states dead_letter_states_tally_insert; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_tally_insert AFTER INSERT ON expiryctl.dead_letter_states REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();


--
-- Name: dead_letter_states dead_letter_states_tally_update; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letter_states_tally_update AFTER UPDATE ON expiryctl.dead_letter_states REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.tally_dead_letters();


--
-- Name: dead_letters dead_letters_immutable; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letters_immutable BEFORE UPDATE ON expiryctl.dead_letters FOR EACH ROW WHEN (((new.payload IS DISTINCT FROM old.payload) OR (new.headers IS DISTINCT FROM old.headers) OR (new.properties IS DISTINCT FROM old.properties) OR (new.payload_sha256 IS DISTINCT FROM old.payload_sha256) OR (new.fingerprint IS DISTINCT FROM old.fingerprint) OR (new.job_key IS DISTINCT FROM old.job_key) OR (new.message_id IS DISTINCT FROM old.message_id) OR (new.reservation_id IS DISTINCT FROM old.reservation_id) OR (new.idempotency_key IS DISTINCT FROM old.idempotency_key) OR (new.expected_version IS DISTINCT FROM old.expected_version) OR (new.due_at IS DISTINCT FROM old.due_at) OR (new.source_queue IS DISTINCT FROM old.source_queue) OR (new.origin_queue IS DISTINCT FROM old.origin_queue) OR (new.original_exchange IS DISTINCT FROM old.original_exchange) OR (new.original_routing_key IS DISTINCT FROM old.original_routing_key) OR (new.content_type IS DISTINCT FROM old.content_type) OR (new.payload_size IS DISTINCT FROM old.payload_size) OR (new.dead_lettered_at IS DISTINCT FROM old.dead_lettered_at) OR (new.ingested_at IS DISTINCT FROM old.ingested_at) OR (new.reason_category IS DISTINCT FROM old.reason_category) OR (new.error_class IS DISTINCT FROM old.error_class) OR (new.last_error IS DISTINCT FROM old.last_error) OR (new.attempt_history IS DISTINCT FROM old.attempt_history) OR (new.previous_id IS DISTINCT FROM old.previous_id) OR (new.replay_request_id IS DISTINCT FROM old.replay_request_id) OR (new.replay_count IS DISTINCT FROM old.replay_count) OR (new.id IS DISTINCT FROM old.id) OR (new.redacted_at IS DISTINCT FROM old.redacted_at) OR (new.attempts IS DISTINCT FROM old.attempts) OR (new.source_system IS DISTINCT FROM old.source_system) OR (new.native IS DISTINCT FROM old.native) OR (new.connection IS DISTINCT FROM old.connection))) EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();


--
-- Name: dead_letters dead_letters_no_delete; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letters_no_delete BEFORE DELETE ON expiryctl.dead_letters FOR EACH ROW EXECUTE FUNCTION expiryctl.dead_letters_refuse_change();


--
-- Name: dead_letters dead_letters_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letters_no_truncate BEFORE TRUNCATE ON expiryctl.dead_letters FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();


--
-- Name: dead_letters dead_letters_track_state; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER dead_letters_track_state AFTER INSERT ON expiryctl.dead_letters REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.dead_letters_track_state();


--
-- Name: replay_items replay_items_frozen; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_frozen BEFORE UPDATE ON expiryctl.replay_items FOR EACH ROW WHEN (((new.request_id IS DISTINCT FROM old.request_id) OR (new.dead_letter_id IS DISTINCT FROM old.dead_letter_id) OR (new.ordinal IS DISTINCT FROM old.ordinal) OR (new.payload_sha256 IS DISTINCT FROM old.payload_sha256) OR (new.retry_after IS DISTINCT FROM old.retry_after))) EXECUTE FUNCTION expiryctl.replay_items_guard();


--
-- Name: replay_items replay_items_guard; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_guard BEFORE INSERT OR DELETE ON expiryctl.replay_items FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_items_guard();


--
-- Name: replay_items replay_items_moves; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_moves BEFORE UPDATE ON expiryctl.replay_items FOR EACH ROW WHEN (((new.state IS DISTINCT FROM old.state) AND (NOT (((old.state = 'pending'::text) AND (new.state = ANY (ARRAY['publishing'::text, 'skipped'::text, 'failed'::text]))) OR ((old.state = 'publishing'::text) AND (new.state = ANY (ARRAY['confirmed'::text, 'failed'::text, 'skipped'::text, 'pending'::text]))))))) EXECUTE FUNCTION expiryctl.replay_items_refuse_move();


--
-- Name: replay_items replay_items_no_early_close; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_no_early_close BEFORE UPDATE ON expiryctl.replay_items FOR EACH ROW WHEN ((old.open AND (NOT new.open) AND (new.state <> 'confirmed'::text))) EXECUTE FUNCTION expiryctl.replay_items_refuse_early_close();


--
-- Name: replay_items replay_items_no_rewrite; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_no_rewrite BEFORE UPDATE ON expiryctl.replay_items FOR EACH ROW WHEN (((new.open AND (NOT old.open)) OR (new.attempts < old.attempts) OR (new.sends < old.sends) OR ((old.confirmed_at IS NOT NULL) AND (new.confirmed_at IS DISTINCT FROM old.confirmed_at)))) EXECUTE FUNCTION expiryctl.replay_items_refuse_rewrite();


--
-- Name: replay_items replay_items_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_no_truncate BEFORE TRUNCATE ON expiryctl.replay_items FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();


--
-- Name: replay_items replay_items_state_guard; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_items_state_guard AFTER UPDATE ON expiryctl.replay_items REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.replay_items_state_guard();


--
-- Name: replay_outcomes replay_outcomes_no_truncate; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_outcomes_no_truncate BEFORE TRUNCATE ON expiryctl.replay_outcomes FOR EACH STATEMENT EXECUTE FUNCTION expiryctl.audit_refuse_change();


--
-- Name: replay_requests replay_requests_ended; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_requests_ended AFTER UPDATE OF status ON expiryctl.replay_requests FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_request_ended();


--
-- Name: replay_requests replay_requests_guard; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_requests_guard BEFORE INSERT OR UPDATE ON expiryctl.replay_requests FOR EACH ROW EXECUTE FUNCTION expiryctl.replay_request_guard();


--
-- Name: replay_requests replay_requests_handler_frozen; Type: TRIGGER; Schema: expiryctl
--

CREATE TRIGGER replay_requests_handler_frozen BEFORE UPDATE ON expiryctl.replay_requests FOR EACH ROW WHEN (((new.same_handler_ok IS DISTINCT FROM old.same_handler_ok) OR (new.same_handler_why IS DISTINCT FROM old.same_handler_why) OR (new.include_permanent IS DISTINCT FROM old.include_permanent) OR (new.failed_under IS DISTINCT FROM old.failed_under) OR (new.targets IS DISTINCT FROM old.targets) OR (new.via_exchange IS DISTINCT FROM old.via_exchange) OR (new.not_before IS DISTINCT FROM old.not_before) OR (new.include_not_due IS DISTINCT FROM old.include_not_due) OR (new.unwatched_why IS DISTINCT FROM old.unwatched_why))) EXECUTE FUNCTION expiryctl.replay_requests_handler_frozen();


--
-- Name: dead_letters dead_letters_previous_id_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letters
    ADD CONSTRAINT dead_letters_previous_id_fkey FOREIGN KEY (previous_id) REFERENCES expiryctl.dead_letters(id);


--
-- Name: dead_letters dead_letters_source_system_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.dead_letters
    ADD CONSTRAINT dead_letters_source_system_fkey FOREIGN KEY (source_system) REFERENCES expiryctl.queue_systems(name) NOT VALID;


--
-- Name: replay_items replay_items_dead_letter_id_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_items
    ADD CONSTRAINT replay_items_dead_letter_id_fkey FOREIGN KEY (dead_letter_id) REFERENCES expiryctl.dead_letters(id);


--
-- Name: replay_items replay_items_request_id_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_items
    ADD CONSTRAINT replay_items_request_id_fkey FOREIGN KEY (request_id) REFERENCES expiryctl.replay_requests(id);


--
-- Name: replay_outcomes replay_outcomes_request_id_dead_letter_id_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_outcomes
    ADD CONSTRAINT replay_outcomes_request_id_dead_letter_id_fkey FOREIGN KEY (request_id, dead_letter_id) REFERENCES expiryctl.replay_items(request_id, dead_letter_id);


--
-- Name: replay_runner_leases replay_runner_leases_request_id_fkey; Type: FK CONSTRAINT; Schema: expiryctl
--

ALTER TABLE ONLY expiryctl.replay_runner_leases
    ADD CONSTRAINT replay_runner_leases_request_id_fkey FOREIGN KEY (request_id) REFERENCES expiryctl.replay_requests(id);


--
-- Name: audit_chain; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_chain ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_checkpoints; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_checkpoints ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_count_leaves; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_count_leaves ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_count_tree; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_count_tree ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_log; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_log ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_trail; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_trail ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_tree; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.audit_tree ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letter_arrival_tallies; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letter_arrival_tallies ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letter_class_tallies; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letter_class_tallies ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letter_due_tallies; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letter_due_tallies ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letter_states; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letter_states ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letter_tallies; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letter_tallies ENABLE ROW LEVEL SECURITY;

--
-- Name: dead_letters; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.dead_letters ENABLE ROW LEVEL SECURITY;

--
-- Name: policy; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.policy ENABLE ROW LEVEL SECURITY;

--
-- Name: policy_changes; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.policy_changes ENABLE ROW LEVEL SECURITY;

--
-- Name: queue_systems; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.queue_systems ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_chain reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_chain FOR SELECT USING (true);


--
-- Name: audit_checkpoints reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_checkpoints FOR SELECT USING (true);


--
-- Name: audit_count_leaves reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_count_leaves FOR SELECT USING (true);


--
-- Name: audit_count_tree reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_count_tree FOR SELECT USING (true);


--
-- Name: audit_log reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_log FOR SELECT USING (true);


--
-- Name: audit_trail reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_trail FOR SELECT USING (true);


--
-- Name: audit_tree reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.audit_tree FOR SELECT USING (true);


--
-- Name: dead_letter_arrival_tallies reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letter_arrival_tallies FOR SELECT USING (true);


--
-- Name: dead_letter_class_tallies reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letter_class_tallies FOR SELECT USING (true);


--
-- Name: dead_letter_due_tallies reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letter_due_tallies FOR SELECT USING (true);


--
-- Name: dead_letter_states reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letter_states FOR SELECT USING (true);


--
-- Name: dead_letter_tallies reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letter_tallies FOR SELECT USING (true);


--
-- Name: dead_letters reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.dead_letters FOR SELECT USING (true);


--
-- Name: policy reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.policy FOR SELECT USING (true);


--
-- Name: policy_changes reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.policy_changes FOR SELECT USING (true);


--
-- Name: queue_systems reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.queue_systems FOR SELECT USING (true);


--
-- Name: replay_items reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.replay_items FOR SELECT USING (true);


--
-- Name: replay_outcomes reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.replay_outcomes FOR SELECT USING (true);


--
-- Name: replay_requests reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.replay_requests FOR SELECT USING (true);


--
-- Name: replay_runner_leases reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.replay_runner_leases FOR SELECT USING (true);


--
-- Name: schema_definitions reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.schema_definitions FOR SELECT USING (true);


--
-- Name: schema_definitions_before reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.schema_definitions_before FOR SELECT USING (true);


--
-- Name: schema_migrate_lock reads; Type: POLICY; Schema: expiryctl
--

CREATE POLICY reads ON expiryctl.schema_migrate_lock FOR SELECT USING (true);


--
-- Name: replay_items; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_items ENABLE ROW LEVEL SECURITY;

--
-- Name: replay_outcomes; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_outcomes ENABLE ROW LEVEL SECURITY;

--
-- Name: replay_requests; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_requests ENABLE ROW LEVEL SECURITY;

--
-- Name: replay_runner_leases; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.replay_runner_leases ENABLE ROW LEVEL SECURITY;

--
-- Name: schema_definitions; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.schema_definitions ENABLE ROW LEVEL SECURITY;

--
-- Name: schema_definitions_before; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.schema_definitions_before ENABLE ROW LEVEL SECURITY;

--
-- Name: schema_migrate_lock; Type: ROW SECURITY; Schema: expiryctl
--

ALTER TABLE expiryctl.schema_migrate_lock ENABLE ROW LEVEL SECURITY;

--
-- Name: SCHEMA expiryctl; Type: ACL; Schema: -
--

GRANT USAGE ON SCHEMA expiryctl TO expiryctl_ingester;
GRANT USAGE ON SCHEMA expiryctl TO expiryctl_operator;
GRANT USAGE ON SCHEMA expiryctl TO expiryctl_approver;
GRANT USAGE ON SCHEMA expiryctl TO expiryctl_auditor;
GRANT USAGE ON SCHEMA expiryctl TO expiryctl_admin;


--
-- Name: FUNCTION access_change(actor text, login text, groups text[], grant_it boolean); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.access_change(actor text, login text, groups text[], grant_it boolean) FROM PUBLIC;


--
-- Name: FUNCTION access_granted(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.access_granted() FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.access_granted() TO expiryctl_auditor;


--
-- Name: FUNCTION actor_label(declared text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.actor_label(declared text) FROM PUBLIC;


--
-- Name: FUNCTION audit_append(actor text, action text, target text, details jsonb, outcome text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.audit_append(actor text, action text, target text, details jsonb, outcome text) TO expiryctl_admin;


--
-- Name: FUNCTION audit_build(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_build() FROM PUBLIC;


--
-- Name: FUNCTION audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.audit_canonical(seq bigint, at timestamp with time zone, actor text, db_role text, action text, target text, details jsonb, outcome text, prev_hash bytea) TO expiryctl_admin;


--
-- Name: FUNCTION audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.audit_checkpoint_record(actor text, tree_size bigint, root_hash bytea, signed_note text) TO expiryctl_auditor;


--
-- Name: FUNCTION audit_count_bucket(field text, value text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_count_bucket(field text, value text) FROM PUBLIC;


--
-- Name: FUNCTION audit_count_key(field text, value text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_count_key(field text, value text) FROM PUBLIC;


--
-- Name: FUNCTION audit_counts_extend(new_size bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_counts_extend(new_size bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.audit_counts_extend(new_size bigint) TO expiryctl_auditor;


--
-- Name: FUNCTION audit_next_at(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_next_at() FROM PUBLIC;


--
-- Name: FUNCTION audit_next_prev_hash(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_next_prev_hash() FROM PUBLIC;


--
-- Name: FUNCTION audit_next_seq(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_next_seq() FROM PUBLIC;


--
-- Name: FUNCTION audit_refuse_change(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_refuse_change() FROM PUBLIC;


--
-- Name: FUNCTION audit_refuse_forged(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_refuse_forged() FROM PUBLIC;


--
-- Name: FUNCTION audit_tree_extend(old_size bigint, batch integer); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.audit_tree_extend(old_size bigint, batch integer) TO expiryctl_ingester;


--
-- Name: FUNCTION audit_tree_root(size bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_tree_root(size bigint) FROM PUBLIC;


--
-- Name: FUNCTION audit_write(actor text, action text, target text, details jsonb, outcome text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.audit_write(actor text, action text, target text, details jsonb, outcome text) FROM PUBLIC;


--
-- Name: FUNCTION caller_in(VARIADIC groups text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.caller_in(VARIADIC groups text[]) TO expiryctl_admin;


--
-- Name: FUNCTION caller_is_owner(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.caller_is_owner() FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.caller_is_owner() TO expiryctl_admin;


--
-- Name: FUNCTION count_word(n bigint, one text, many text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.count_word(n bigint, one text, many text) FROM PUBLIC;


--
-- Name: FUNCTION dead_letter_states_refuse_change(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.dead_letter_states_refuse_change() FROM PUBLIC;


--
-- Name: FUNCTION dead_letters_refuse_change(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.dead_letters_refuse_change() FROM PUBLIC;


--
-- Name: FUNCTION dead_letters_track_state(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.dead_letters_track_state() FROM PUBLIC;


--
-- Name: FUNCTION handler_version_of(headers jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.handler_version_of(headers jsonb) FROM PUBLIC;


--
-- Name: FUNCTION ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[]) TO expiryctl_operator;


--
-- Name: FUNCTION ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.ingest_letters(actor text, queue text, fingerprints bytea[], job_keys text[], message_ids text[], reservation_ids text[], idempotency_keys text[], expected_versions bigint[], due_ats timestamp with time zone[], source_queues text[], origin_queues text[], original_exchanges text[], original_routing_keys text[], reason_categories text[], error_classes text[], last_errors text[], attempts integer[], attempt_histories text[], headers text[], content_types text[], payloads bytea[], dead_lettered_ats timestamp with time zone[], replay_request_ids bigint[], replay_counts integer[], properties text[], source_systems text[], natives text[], connections text[]) TO expiryctl_operator;


--
-- Name: TABLE dead_letters; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letters TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letters TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letters TO expiryctl_admin;


--
-- Name: COLUMN dead_letters.id; Type: ACL; Schema: expiryctl
--

GRANT SELECT(id) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.fingerprint; Type: ACL; Schema: expiryctl
--

GRANT SELECT(fingerprint) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.job_key; Type: ACL; Schema: expiryctl
--

GRANT SELECT(job_key) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.message_id; Type: ACL; Schema: expiryctl
--

GRANT SELECT(message_id) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.reservation_id; Type: ACL; Schema: expiryctl
--

GRANT SELECT(reservation_id) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.idempotency_key; Type: ACL; Schema: expiryctl
--

GRANT SELECT(idempotency_key) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.expected_version; Type: ACL; Schema: expiryctl
--

GRANT SELECT(expected_version) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.due_at; Type: ACL; Schema: expiryctl
--

GRANT SELECT(due_at) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.source_queue; Type: ACL; Schema: expiryctl
--

GRANT SELECT(source_queue) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.origin_queue; Type: ACL; Schema: expiryctl
--

GRANT SELECT(origin_queue) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.original_exchange; Type: ACL; Schema: expiryctl
--

GRANT SELECT(original_exchange) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.original_routing_key; Type: ACL; Schema: expiryctl
--

GRANT SELECT(original_routing_key) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.reason_category; Type: ACL; Schema: expiryctl
--

GRANT SELECT(reason_category) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.error_class; Type: ACL; Schema: expiryctl
--

GRANT SELECT(error_class) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.last_error; Type: ACL; Schema: expiryctl
--

GRANT SELECT(last_error) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.attempts; Type: ACL; Schema: expiryctl
--

GRANT SELECT(attempts) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.attempt_history; Type: ACL; Schema: expiryctl
--

GRANT SELECT(attempt_history) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.content_type; Type: ACL; Schema: expiryctl
--

GRANT SELECT(content_type) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.payload_sha256; Type: ACL; Schema: expiryctl
--

GRANT SELECT(payload_sha256) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.payload_size; Type: ACL; Schema: expiryctl
--

GRANT SELECT(payload_size) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.dead_lettered_at; Type: ACL; Schema: expiryctl
--

GRANT SELECT(dead_lettered_at) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.ingested_at; Type: ACL; Schema: expiryctl
--

GRANT SELECT(ingested_at) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.previous_id; Type: ACL; Schema: expiryctl
--

GRANT SELECT(previous_id) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.replay_request_id; Type: ACL; Schema: expiryctl
--

GRANT SELECT(replay_request_id) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.replay_count; Type: ACL; Schema: expiryctl
--

GRANT SELECT(replay_count) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.redacted_at; Type: ACL; Schema: expiryctl
--

GRANT SELECT(redacted_at) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.properties; Type: ACL; Schema: expiryctl
--

GRANT SELECT(properties) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.source_system; Type: ACL; Schema: expiryctl
--

GRANT SELECT(source_system) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.native; Type: ACL; Schema: expiryctl
--

GRANT SELECT(native) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: COLUMN dead_letters.connection; Type: ACL; Schema: expiryctl
--

GRANT SELECT(connection) ON TABLE expiryctl.dead_letters TO expiryctl_auditor;


--
-- Name: FUNCTION letters_matching(f jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.letters_matching(f jsonb) FROM PUBLIC;


--
-- Name: FUNCTION letters_named(ids text[], verb_one text, verb_many text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.letters_named(ids text[], verb_one text, verb_many text) FROM PUBLIC;


--
-- Name: FUNCTION not_found(kind text, id bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.not_found(kind text, id bigint) FROM PUBLIC;


--
-- Name: FUNCTION permanent_categories(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.permanent_categories() FROM PUBLIC;


--
-- Name: FUNCTION policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.policy_apply(changes jsonb, by_label text, OUT before jsonb, OUT after jsonb) FROM PUBLIC;


--
-- Name: FUNCTION policy_review(actor text, change bigint, decision text, why text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.policy_review(actor text, change bigint, decision text, why text) TO expiryctl_admin;


--
-- Name: FUNCTION policy_set(actor text, changes jsonb, why text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.policy_set(actor text, changes jsonb, why text) TO expiryctl_admin;


--
-- Name: FUNCTION purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.purge_letters(actor text, cutoff timestamp with time zone, batch integer, after bigint) TO expiryctl_admin;


--
-- Name: FUNCTION queue_systems_register(systems text[], queue_prefixes text[], in_place boolean[], connection_in_queue boolean[], default_connections text[], consumers_unseen text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.queue_systems_register(systems text[], queue_prefixes text[], in_place boolean[], connection_in_queue boolean[], default_connections text[], consumers_unseen text[]) FROM PUBLIC;


--
-- Name: FUNCTION refuse_text(rule text, message text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.refuse_text(rule text, message text) FROM PUBLIC;


--
-- Name: FUNCTION replay_canary_record(actor text, request bigint, passed boolean, details jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_canary_record(actor text, request bigint, passed boolean, details jsonb) TO expiryctl_operator;


--
-- Name: FUNCTION replay_cancel(actor text, request bigint, why text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_cancel(actor text, request bigint, why text) TO expiryctl_operator;


--
-- Name: FUNCTION replay_cohort_changes(req bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.replay_cohort_changes(req bigint) TO expiryctl_admin;


--
-- Name: FUNCTION replay_discard_window(request bigint, lo integer, hi integer); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_discard_window(request bigint, lo integer, hi integer) TO expiryctl_operator;


--
-- Name: FUNCTION replay_dlq_watch_check(request bigint, unwatched_why text, dlq_watch jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_dlq_watch_check(request bigint, unwatched_why text, dlq_watch jsonb) FROM PUBLIC;


--
-- Name: FUNCTION replay_expire_stale(actor text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_ingester;
GRANT ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_auditor;
GRANT ALL ON FUNCTION expiryctl.replay_expire_stale(actor text) TO expiryctl_admin;


--
-- Name: FUNCTION replay_handler_check(request bigint, failed_under jsonb, consumers jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_handler_check(request bigint, failed_under jsonb, consumers jsonb) FROM PUBLIC;


--
-- Name: FUNCTION replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.replay_item_not_before(request_not_before timestamp with time zone, include_not_due boolean, retry_after timestamp with time zone, due_at timestamp with time zone) TO expiryctl_auditor;


--
-- Name: FUNCTION replay_items_guard(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_guard() FROM PUBLIC;


--
-- Name: FUNCTION replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_items_mark(request bigint, lo integer, hi integer, publish bigint[], skip bigint[], skip_why text[], fail bigint[], fail_why text[]) TO expiryctl_operator;


--
-- Name: FUNCTION replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_items_record(request bigint, lo integer, hi integer, confirmed bigint[], failed bigint[], failed_why text[]) TO expiryctl_operator;


--
-- Name: FUNCTION replay_items_refuse_early_close(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_early_close() FROM PUBLIC;


--
-- Name: FUNCTION replay_items_refuse_move(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_move() FROM PUBLIC;


--
-- Name: FUNCTION replay_items_refuse_rewrite(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_refuse_rewrite() FROM PUBLIC;


--
-- Name: FUNCTION replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_items_send(request bigint, lo integer, hi integer, items bigint[], delayed boolean) TO expiryctl_operator;


--
-- Name: FUNCTION replay_items_state_guard(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_items_state_guard() FROM PUBLIC;


--
-- Name: FUNCTION replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_outcomes_record(request bigint, letters bigint[], published_ats timestamp with time zone[], confirmed_ats timestamp with time zone[], window_ends timestamp with time zone[], terminal_ats timestamp with time zone[], duplicates boolean[]) TO expiryctl_operator;


--
-- Name: FUNCTION replay_publish_bound(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_publish_bound() FROM PUBLIC;


--
-- Name: FUNCTION replay_published_job(request bigint, job text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_published_job(request bigint, job text) FROM PUBLIC;


--
-- Name: FUNCTION replay_refuse(rule text, message text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_refuse(rule text, message text) FROM PUBLIC;


--
-- Name: FUNCTION replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean, same_handler_why text, include_permanent boolean, via_exchange boolean, not_before timestamp with time zone, include_not_due boolean, unwatched_why text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean, same_handler_why text, include_permanent boolean, via_exchange boolean, not_before timestamp with time zone, include_not_due boolean, unwatched_why text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_request_create(actor text, kind text, selection jsonb, rate numeric, canary integer, to_exchange text, to_routing_key text, why text, fresh_key boolean, confirm_eligible boolean, same_handler_ok boolean, same_handler_why text, include_permanent boolean, via_exchange boolean, not_before timestamp with time zone, include_not_due boolean, unwatched_why text) TO expiryctl_operator;


--
-- Name: FUNCTION replay_request_ended(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_request_ended() FROM PUBLIC;


--
-- Name: FUNCTION replay_request_guard(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_request_guard() FROM PUBLIC;


--
-- Name: FUNCTION replay_requests_handler_frozen(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_requests_handler_frozen() FROM PUBLIC;


--
-- Name: FUNCTION replay_retries_in_place(system text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.replay_retries_in_place(system text) TO expiryctl_auditor;


--
-- Name: FUNCTION replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_review(actor text, request bigint, decision text, why text, allow_fresh_key boolean, shown_cohort_hash bytea, signed_note text) TO expiryctl_approver;


--
-- Name: FUNCTION replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_acked_after_cancel(actor text, request bigint, acked bigint[]) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_acquire(request bigint, application text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_acquire(request bigint, application text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_acquire(request bigint, application text) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_captures(queues text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_captures(queues text[]) FROM PUBLIC;


--
-- Name: FUNCTION replay_run_complete(actor text, request bigint, details jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_complete(actor text, request bigint, details jsonb) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_halt(actor text, request bigint, reason text, unsent bigint[], details jsonb) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_interrupted(actor text, request bigint, unsent bigint[], details jsonb) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_lease(request bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_lease(request bigint) FROM PUBLIC;


--
-- Name: FUNCTION replay_run_release(request bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_release(request bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_release(request bigint) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_start(actor text, request bigint, consumers jsonb, dlq_watch jsonb); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb, dlq_watch jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_start(actor text, request bigint, consumers jsonb, dlq_watch jsonb) TO expiryctl_operator;


--
-- Name: FUNCTION replay_run_watch_owed(request bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_run_watch_owed(request bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_run_watch_owed(request bigint) TO expiryctl_operator;


--
-- Name: FUNCTION replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.replay_target_of(original_exchange text, original_routing_key text, origin_queue text, source_queue text, to_exchange text, to_routing_key text, via_exchange boolean) TO expiryctl_auditor;


--
-- Name: FUNCTION replay_watched_queues(request bigint); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.replay_watched_queues(request bigint) TO expiryctl_auditor;


--
-- Name: FUNCTION require_role(action text, VARIADIC groups text[]); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.require_role(action text, VARIADIC groups text[]) FROM PUBLIC;


--
-- Name: FUNCTION retry_after_of(headers jsonb, at timestamp with time zone); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.retry_after_of(headers jsonb, at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION tally_dead_letter_signals(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.tally_dead_letter_signals() FROM PUBLIC;


--
-- Name: FUNCTION tally_dead_letters(); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.tally_dead_letters() FROM PUBLIC;


--
-- Name: FUNCTION work_queue_of(queue text); Type: ACL; Schema: expiryctl
--

REVOKE ALL ON FUNCTION expiryctl.work_queue_of(queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_operator;
GRANT ALL ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_approver;
GRANT ALL ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_admin;
GRANT ALL ON FUNCTION expiryctl.work_queue_of(queue text) TO expiryctl_auditor;


--
-- Name: TABLE audit_checkpoints; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_checkpoints TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.audit_checkpoints TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.audit_checkpoints TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.audit_checkpoints TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.audit_checkpoints TO expiryctl_admin;


--
-- Name: TABLE audit_count_leaves; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_count_leaves TO expiryctl_auditor;


--
-- Name: TABLE audit_count_tree; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_count_tree TO expiryctl_auditor;


--
-- Name: TABLE audit_log; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_log TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.audit_log TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.audit_log TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.audit_log TO expiryctl_admin;


--
-- Name: COLUMN audit_log.seq; Type: ACL; Schema: expiryctl
--

GRANT SELECT(seq) ON TABLE expiryctl.audit_log TO expiryctl_ingester;


--
-- Name: COLUMN audit_log.hash; Type: ACL; Schema: expiryctl
--

GRANT SELECT(hash) ON TABLE expiryctl.audit_log TO expiryctl_ingester;


--
-- Name: TABLE audit_trail; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_trail TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.audit_trail TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.audit_trail TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.audit_trail TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.audit_trail TO expiryctl_admin;


--
-- Name: TABLE audit_tree; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.audit_tree TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.audit_tree TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.audit_tree TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.audit_tree TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.audit_tree TO expiryctl_admin;


--
-- Name: TABLE dead_letter_arrival_tallies; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letter_arrival_tallies TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letter_arrival_tallies TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letter_arrival_tallies TO expiryctl_admin;


--
-- Name: TABLE dead_letter_class_tallies; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letter_class_tallies TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letter_class_tallies TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letter_class_tallies TO expiryctl_admin;


--
-- Name: TABLE dead_letter_due_tallies; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letter_due_tallies TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letter_due_tallies TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letter_due_tallies TO expiryctl_admin;


--
-- Name: TABLE dead_letter_states; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letter_states TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letter_states TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letter_states TO expiryctl_admin;
GRANT SELECT ON TABLE expiryctl.dead_letter_states TO expiryctl_auditor;


--
-- Name: TABLE dead_letter_tallies; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.dead_letter_tallies TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.dead_letter_tallies TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.dead_letter_tallies TO expiryctl_admin;


--
-- Name: TABLE policy; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.policy TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.policy TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.policy TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.policy TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.policy TO expiryctl_admin;


--
-- Name: TABLE policy_changes; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.policy_changes TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.policy_changes TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.policy_changes TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.policy_changes TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.policy_changes TO expiryctl_admin;


--
-- Name: TABLE queue_systems; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.queue_systems TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.queue_systems TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.queue_systems TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.queue_systems TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.queue_systems TO expiryctl_admin;


--
-- Name: TABLE replay_items; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.replay_items TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.replay_items TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.replay_items TO expiryctl_admin;
GRANT SELECT ON TABLE expiryctl.replay_items TO expiryctl_auditor;


--
-- Name: TABLE replay_outcomes; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.replay_outcomes TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.replay_outcomes TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.replay_outcomes TO expiryctl_admin;
GRANT SELECT ON TABLE expiryctl.replay_outcomes TO expiryctl_auditor;


--
-- Name: TABLE replay_requests; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.replay_requests TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.replay_requests TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.replay_requests TO expiryctl_admin;
GRANT SELECT ON TABLE expiryctl.replay_requests TO expiryctl_auditor;


--
-- Name: TABLE replay_runner_leases; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.replay_runner_leases TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.replay_runner_leases TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.replay_runner_leases TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.replay_runner_leases TO expiryctl_admin;


--
-- Name: TABLE schema_definitions; Type: ACL; Schema: expiryctl
--

GRANT SELECT ON TABLE expiryctl.schema_definitions TO expiryctl_ingester;
GRANT SELECT ON TABLE expiryctl.schema_definitions TO expiryctl_operator;
GRANT SELECT ON TABLE expiryctl.schema_definitions TO expiryctl_approver;
GRANT SELECT ON TABLE expiryctl.schema_definitions TO expiryctl_auditor;
GRANT SELECT ON TABLE expiryctl.schema_definitions TO expiryctl_admin;


--
-- The groups: cluster-wide roles that `expiryctl migrate` creates where they
-- are missing (roles belong to no database, so these lines are comments).
-- People are logins made members with `expiryctl access grant`.
--

-- CREATE ROLE expiryctl_admin NOLOGIN NOINHERIT;
-- CREATE ROLE expiryctl_approver NOLOGIN NOINHERIT;
-- CREATE ROLE expiryctl_auditor NOLOGIN NOINHERIT;
-- CREATE ROLE expiryctl_ingester NOLOGIN NOINHERIT;
-- CREATE ROLE expiryctl_operator NOLOGIN NOINHERIT;


--
-- The owner's default privileges in the database, for the objects later
-- migrations create (pg_dump of one schema leaves them out).
--

ALTER DEFAULT PRIVILEGES FOR ROLE expiryctl_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
