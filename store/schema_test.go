package store_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

var update = flag.Bool("update", false, "rewrite schema.sql from a fresh migrate, and pin new migrations in migrations.sum")

// schemaFile is the committed shape of the schema.
const schemaFile = "schema.sql"

// regenerate is how a developer brings schema.sql and migrations.sum up to date.
const regenerate = "`make schema` (go test ./store -run '^(TestSchemaIsCurrent|TestMigrationChecksums)$' -update)"

// ownerPlaceholder is how schema.sql names the role that ran `expiryctl
// migrate`, which is the deployer's choice (pgtest.Owner in tests).
const ownerPlaceholder = "expiryctl_owner"

// TestSchemaIsCurrent migrates an empty database and compares its schema
// with schema.sql, so that the file a newcomer reads is the schema every
// migrated database has.
func TestSchemaIsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := ownedEmptyDatabase(t)
	if _, err := store.Migrate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	got := dumpSchema(t, db)
	if *update {
		if err := os.WriteFile(schemaFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v: generate it with %s", err, regenerate)
	}
	if string(want) != got {
		t.Fatalf("%s is stale: an empty database migrated to version %d has another schema.\n"+
			"Regenerate it with %s and commit it with the migration.\n%s",
			schemaFile, store.LatestVersion(), regenerate, diffExcerpt(string(want), got, "schema.sql", "migrated"))
	}
}

// TestNoFunctionIsPublic holds every function of the schema to EXECUTE
// granted only to the groups that need it: a function PUBLIC may call is
// one any login of the cluster may call. Migration 00008 meant to ensure it
// by default privileges that could not (00010 repaired that), and nothing
// noticed until this was checked; each function's file now revokes it
// itself. A SECURITY DEFINER function must pin search_path, or a caller's
// objects could stand in for the schema's.
func TestNoFunctionIsPublic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	rows, err := db.Pool.Query(ctx, `SELECT p.oid::regprocedure::text,
			has_function_privilege('public', p.oid, 'EXECUTE'),
			p.prosecdef AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')
		FROM pg_proc p
		WHERE p.pronamespace = $1::regnamespace
		ORDER BY 1`, store.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var functions int
	for rows.Next() {
		var name string
		var public, unpinned bool
		if err := rows.Scan(&name, &public, &unpinned); err != nil {
			t.Fatal(err)
		}
		functions++
		if public {
			t.Errorf("PUBLIC may execute %s: its file under store/functions/ must REVOKE ALL ON FUNCTION %s FROM PUBLIC and grant EXECUTE to the groups that need it", name, name)
		}
		if unpinned {
			t.Errorf("%s is SECURITY DEFINER without a pinned search_path: its file under store/functions/ must SET search_path = pg_catalog, pg_temp", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if functions == 0 {
		t.Fatalf("no functions in schema %s: the check looked in the wrong place", store.Schema)
	}
}

// ownedEmptyDatabase returns an empty database owned by pgtest.Owner and a
// pool connected as that owner: migrations run as a schema owner who is not
// a superuser, as `expiryctl migrate` does in production and as pgtest
// migrates its template. The database's own pool is the superuser's.
func ownedEmptyDatabase(t *testing.T) (*pgtest.Database, *pgxpool.Pool) {
	t.Helper()
	// pgtest creates its Owner role with the first template of a cluster.
	pgtest.New(t)
	db := pgtest.NewEmpty(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" OWNER TO "+pgx.Identifier{pgtest.Owner}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return db, pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner))
}

// dumpSchema returns the schema of db as schema.sql holds it: pg_dump's
// schema-only dump of the expiryctl schema (goose's version table left
// out), without what depends on the server's minor version or on the
// database it came from, followed by what pg_dump leaves out of a dump of
// one schema: the groups, and the owner's default privileges in the
// database.
func dumpSchema(t *testing.T, db *pgtest.Database) string {
	t.Helper()
	ctx := context.Background()
	var versionNum int
	var owner string
	if err := db.Pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
		(SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = $1)`, store.Schema).Scan(&versionNum, &owner); err != nil {
		t.Fatalf("read the server version and the schema's owner: %v", err)
	}
	major := versionNum / 10000

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgDump(t, major), "--schema-only", "--no-owner",
		"--schema="+store.Schema, "--exclude-table="+store.Schema+".schema_version", "--dbname="+db.URL)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, stderr.String())
	}
	body, err := dumpBody(string(raw))
	if err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, schemaHeader, store.LatestVersion(), major)
	b.WriteString(body)
	b.WriteString(groupsSection(t, db.Pool))
	b.WriteString(defaultPrivilegesSection(t, db.Pool))
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(owner)+`\b`).ReplaceAllLiteralString(b.String(), ownerPlaceholder)
}

const schemaHeader = `-- schema.sql: the schema "expiryctl" as ` + "`expiryctl migrate`" + ` (migrations up to
-- %05d, then the files of store/functions/) leaves an empty database, dumped
-- by pg_dump --schema-only from PostgreSQL %d. Generated: do not edit. After a
-- new migration or a change to a function's file, regenerate it with
-- ` + "`make schema`" + `; TestSchemaIsCurrent fails while it is stale. To read or
-- change one function, open its file: store/functions/NAME.sql.
--
-- How to read it:
--   * Every object is owned by the role that ran ` + "`expiryctl migrate`" + ` (the
--     schema's owner, not a superuser), named ` + ownerPlaceholder + ` here. SECURITY
--     DEFINER functions run as it: that is how the groups write through them.
--   * The privileges (GRANT and REVOKE, after all the objects) are the
--     governance rules: no group holds INSERT, UPDATE, DELETE or TRUNCATE on a
--     table, and a function is executable only by the groups granted it.
--   * The groups are cluster-wide roles, listed at the end with the owner's
--     default privileges in the database.
--   * goose's version table (expiryctl.schema_version) is left out.
--

`

// dumpBody is pg_dump's output from its first object to its last, less what
// would make two dumps of one schema differ: the versions of the server and
// of pg_dump, the session settings (which vary with the major version), the
// random key of \restrict, and the owner's column of the table of contents
// (pg_dump --no-owner writes "-").
func dumpBody(raw string) (string, error) {
	start := strings.Index(raw, "--\n-- Name: ")
	end := strings.Index(raw, "--\n-- PostgreSQL database dump complete")
	if start < 0 || end < start {
		return "", fmt.Errorf("pg_dump's output is not laid out as expected (no \"-- Name:\" entry, or no end mark):\n%s", raw)
	}
	body := raw[start:end]
	var kept []string
	for _, line := range strings.SplitAfter(body, "\n") {
		if strings.HasPrefix(line, `\restrict `) || strings.HasPrefix(line, `\unrestrict `) {
			continue
		}
		kept = append(kept, line)
	}
	body = strings.Join(kept, "")
	body = strings.Replace(body, "SET default_tablespace = '';\n\n", "", 1)
	body = strings.Replace(body, "SET default_table_access_method = heap;\n\n", "", 1)
	body = strings.ReplaceAll(body, "; Owner: -\n", "\n")
	return body, nil
}

// schemaACLs are the privileges of the schema and of everything in it.
const schemaACLs = `
	SELECT nspacl AS acl FROM pg_namespace WHERE oid = $1::regnamespace
	UNION ALL SELECT relacl FROM pg_class WHERE relnamespace = $1::regnamespace
	UNION ALL SELECT a.attacl FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relnamespace = $1::regnamespace
	UNION ALL SELECT proacl FROM pg_proc WHERE pronamespace = $1::regnamespace
	UNION ALL SELECT typacl FROM pg_type WHERE typnamespace = $1::regnamespace`

// groupsSection lists the roles the schema grants anything to, other than
// its owner, with their attributes and their memberships of one another:
// roles are the cluster's, so pg_dump of a database never shows them.
func groupsSection(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `WITH grantees AS (
			SELECT DISTINCT (aclexplode(acl)).grantee AS oid FROM (`+schemaACLs+`) acls WHERE acl IS NOT NULL)
		SELECT quote_ident(r.rolname), r.rolcanlogin, r.rolinherit, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication, r.rolbypassrls,
			coalesce((SELECT array_agg(quote_ident(g.rolname) ORDER BY g.rolname) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
				WHERE m.member = r.oid AND m.roleid IN (SELECT oid FROM grantees)), '{}')
		FROM pg_roles r
		WHERE r.oid IN (SELECT oid FROM grantees)
		  AND r.oid <> (SELECT nspowner FROM pg_namespace WHERE oid = $1::regnamespace)
		ORDER BY r.rolname`, store.Schema)
	if err != nil {
		t.Fatalf("list the groups: %v", err)
	}
	var b strings.Builder
	b.WriteString("--\n-- The groups: cluster-wide roles that `expiryctl migrate` creates where they\n" +
		"-- are missing (roles belong to no database, so these lines are comments).\n" +
		"-- People are logins made members with `expiryctl access grant`.\n--\n\n")
	for rows.Next() {
		var name string
		var login, inherit, super, createDB, createRole, replication, bypassRLS bool
		var memberOf []string
		if err := rows.Scan(&name, &login, &inherit, &super, &createDB, &createRole, &replication, &bypassRLS, &memberOf); err != nil {
			t.Fatal(err)
		}
		attrs := []string{"NOLOGIN", "NOINHERIT"}
		if login {
			attrs[0] = "LOGIN"
		}
		if inherit {
			attrs[1] = "INHERIT"
		}
		for _, a := range []struct {
			name string
			set  bool
		}{{"SUPERUSER", super}, {"CREATEDB", createDB}, {"CREATEROLE", createRole}, {"REPLICATION", replication}, {"BYPASSRLS", bypassRLS}} {
			if a.set {
				attrs = append(attrs, a.name)
			}
		}
		fmt.Fprintf(&b, "-- CREATE ROLE %s %s;\n", name, strings.Join(attrs, " "))
		for _, g := range memberOf {
			fmt.Fprintf(&b, "-- GRANT %s TO %s;\n", g, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("list the groups: %v", err)
	}
	b.WriteString("\n\n")
	return b.String()
}

// defaultPrivilegesSection writes the schema owner's default privileges
// for the whole database as the statements that set them: pg_dump of one
// schema leaves them out, and they decide what a later migration's CREATE
// FUNCTION grants PUBLIC before anyone revokes it.
func defaultPrivilegesSection(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `WITH d AS (
			SELECT defaclobjtype AS kind, defaclacl AS acl,
				acldefault(CASE defaclobjtype WHEN 'S' THEN 's' ELSE defaclobjtype END, defaclrole) AS base
			FROM pg_default_acl
			WHERE defaclnamespace = 0
			  AND defaclrole = (SELECT nspowner FROM pg_namespace WHERE oid = $1::regnamespace)),
		changes AS (
			SELECT d.kind, 'REVOKE' AS verb, b.privilege_type, b.grantee FROM d, aclexplode(d.base) b
			WHERE NOT EXISTS (SELECT 1 FROM aclexplode(d.acl) a WHERE a.grantee = b.grantee AND a.privilege_type = b.privilege_type)
			UNION ALL
			SELECT d.kind, 'GRANT', a.privilege_type, a.grantee FROM d, aclexplode(d.acl) a
			WHERE NOT EXISTS (SELECT 1 FROM aclexplode(d.base) b WHERE b.grantee = a.grantee AND b.privilege_type = a.privilege_type))
		SELECT CASE kind WHEN 'r' THEN 'TABLES' WHEN 'S' THEN 'SEQUENCES' WHEN 'f' THEN 'FUNCTIONS'
				WHEN 'T' THEN 'TYPES' WHEN 'n' THEN 'SCHEMAS' ELSE kind::text END,
			verb, privilege_type,
			CASE grantee WHEN 0 THEN 'PUBLIC' ELSE grantee::regrole::text END
		FROM changes ORDER BY 1, 2 DESC, 3, 4`, store.Schema)
	if err != nil {
		t.Fatalf("read the default privileges: %v", err)
	}
	var b strings.Builder
	b.WriteString("--\n-- The owner's default privileges in the database, for the objects later\n" +
		"-- migrations create (pg_dump of one schema leaves them out).\n--\n\n")
	for rows.Next() {
		var kind, verb, privilege, grantee string
		if err := rows.Scan(&kind, &verb, &privilege, &grantee); err != nil {
			t.Fatal(err)
		}
		preposition := "TO"
		if verb == "REVOKE" {
			preposition = "FROM"
		}
		fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s %s %s ON %s %s %s;\n", ownerPlaceholder, verb, privilege, kind, preposition, grantee)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the default privileges: %v", err)
	}
	return b.String()
}

// pgDump finds a pg_dump of the server's major version. Debian installs one
// per version under /usr/lib/postgresql (postgresql-client-N, which the
// server package scripts/services.sh installs depends on); the pg_dump on
// PATH is a wrapper that may pick another.
func pgDump(t *testing.T, major int) string {
	t.Helper()
	debian := fmt.Sprintf("/usr/lib/postgresql/%d/bin/pg_dump", major)
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	if path, err := exec.LookPath("pg_dump"); err == nil {
		return path
	}
	t.Fatalf("pg_dump is needed to compare the schema with %s and is neither at %s nor on PATH: install postgresql-client-%d (scripts/services.sh installs it with the server)",
		schemaFile, debian, major)
	return ""
}

// diffExcerpt shows where two texts differ, as the first few hunks of a
// line diff with a little context; enough to see what changed, not a patch.
func diffExcerpt(a, b, aName, bName string) string {
	const context, maxLines, maxHunks = 3, 20, 5
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	write := func(lines []string, sign string) {
		for n, l := range lines {
			if n == maxLines {
				fmt.Fprintf(&out, "%s ... %d more lines\n", sign, len(lines)-maxLines)
				return
			}
			fmt.Fprintf(&out, "%s %s\n", sign, l)
		}
	}
	for i, j, hunks := 0, 0, 0; i < len(al) || j < len(bl); {
		if i < len(al) && j < len(bl) && al[i] == bl[j] {
			i, j = i+1, j+1
			continue
		}
		if hunks == maxHunks {
			out.WriteString("... and more differences\n")
			break
		}
		hunks++
		ni, nj := resync(al, bl, i, j, context)
		fmt.Fprintf(&out, "@@ -%d +%d @@\n", i+1, j+1)
		write(al[max(0, i-context):i], " ")
		write(al[i:ni], "-")
		write(bl[j:nj], "+")
		write(al[ni:min(len(al), ni+context)], " ")
		i, j = ni, nj
	}
	return out.String()
}

// resync finds the nearest lines from which a[i:] and b[j:] agree again for
// run lines (or to both ends), fewest lines skipped first.
func resync(a, b []string, i, j, run int) (int, int) {
	agree := func(x, y int) bool {
		for k := 0; k < run; k++ {
			if x+k == len(a) && y+k == len(b) {
				return true
			}
			if x+k >= len(a) || y+k >= len(b) || a[x+k] != b[y+k] {
				return false
			}
		}
		return true
	}
	const farthest = 2000
	for d := 1; d <= min(farthest, len(a)-i+len(b)-j); d++ {
		for di := 0; di <= d; di++ {
			if x, y := i+di, j+d-di; x <= len(a) && y <= len(b) && agree(x, y) {
				return x, y
			}
		}
	}
	return len(a), len(b)
}
