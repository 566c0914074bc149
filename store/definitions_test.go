package store_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// definitionsDB is a migrated database for t, its pool as the schema's
// owner (who runs `expiryctl migrate`), and its superuser pool.
func definitionsDB(t *testing.T) (*pgtest.Database, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.New(t)
	return db, pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner))
}

// changedFiles is the embedded definition files with each of edits
// applied: a path to new content, or to "" to remove the file.
func changedFiles(t *testing.T, edits map[string]string) fstest.MapFS {
	t.Helper()
	files := fstest.MapFS{}
	err := fs.WalkDir(store.DefinitionFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(store.DefinitionFiles, path)
		files[path] = &fstest.MapFile{Data: raw}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range edits {
		if content == "" {
			if files[path] == nil {
				t.Fatalf("no definition file %s to remove", path)
			}
			delete(files, path)
			continue
		}
		files[path] = &fstest.MapFile{Data: []byte(content)}
	}
	return files
}

// replaceIn is the embedded file path with old replaced by new, once.
func replaceIn(t *testing.T, path, old, new string) string {
	t.Helper()
	raw, err := fs.ReadFile(store.DefinitionFiles, path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	return strings.Replace(string(raw), old, new, 1)
}

// catalogVersions maps every function of the schema to its catalog row's
// version (xmin), which any CREATE OR REPLACE or GRANT moves.
func catalogVersions(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT oid::regprocedure::text, xmin::text FROM pg_proc
		WHERE pronamespace = 'expiryctl'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for rows.Next() {
		var name, version string
		if err := rows.Scan(&name, &version); err != nil {
			t.Fatal(err)
		}
		versions[name] = version
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return versions
}

func functionSource(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var src string
	if err := pool.QueryRow(context.Background(), `SELECT string_agg(prosrc, E'\n---\n') FROM pg_proc
		WHERE pronamespace = 'expiryctl'::regnamespace AND proname = $1`, name).Scan(&src); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestMigrateOnACurrentDatabaseWritesNothing: a second migrate applies no
// numbered migration and no definition, and leaves every function's
// catalog row as it was.
func TestMigrateOnACurrentDatabaseWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := ownedEmptyDatabase(t)
	if _, err := store.Migrate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	before := catalogVersions(t, db.Pool)
	res, err := store.Migrate(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(res.Definitions.Replaced) != 0 || len(res.Definitions.Dropped) != 0 {
		t.Errorf("migrate on a current database applied %v, replaced %v, dropped %v; want nothing", res.Applied, res.Definitions.Replaced, res.Definitions.Dropped)
	}
	if res.Definitions.Total != len(before)-1 {
		// ingest_letters has two overloads in one file.
		t.Errorf("%d definition files for %d functions; want one file per function name", res.Definitions.Total, len(before))
	}
	after := catalogVersions(t, db.Pool)
	for name, version := range before {
		if after[name] != version {
			t.Errorf("%s was written by a migrate that had nothing to do", name)
		}
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
}

// TestChangedDefinitionReplacesItsFunction edits one real function's file,
// purge_letters, the way a change is made now: the edit is the whole diff.
// Migrate replaces that function and names it; until it does, the
// database is not this binary's (CheckSchema), and once the files are
// back it is again.
func TestChangedDefinitionReplacesItsFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	const file = "functions/purge_letters.sql"
	edited := changedFiles(t, map[string]string{file: replaceIn(t, file,
		"a purge may redact only letters captured before", "a purge redacts only letters captured before")})

	res, err := store.ApplyDefinitionsFrom(ctx, owner, edited)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replaced, []string{file}) || len(res.Dropped) != 0 {
		t.Fatalf("replaced %v, dropped %v; want only %s replaced", res.Replaced, res.Dropped, file)
	}
	if src := functionSource(t, db.Pool, "purge_letters"); !strings.Contains(src, "a purge redacts only letters") {
		t.Fatalf("purge_letters after the change:\n%s", src)
	}
	var outdated *store.SchemaOutdatedError
	err = store.CheckSchema(ctx, db.Pool)
	if !errors.As(err, &outdated) || !outdated.Definitions {
		t.Fatalf("CheckSchema on functions of other files = %v, want a SchemaOutdatedError naming the definitions", err)
	}
	if !strings.Contains(err.Error(), "run `expiryctl migrate`") {
		t.Errorf("the error does not say what to do: %v", err)
	}

	res, err = store.ApplyDefinitions(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replaced, []string{file}) {
		t.Errorf("back to the embedded files replaced %v, want %s", res.Replaced, file)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
}

// TestChangedSignatureDropsTheOldFunction: a new parameter makes a new
// overload; the old one is dropped, and the new one has the grants its
// file gives.
func TestChangedSignatureDropsTheOldFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	const file = "functions/replay_run_halt.sql"
	raw, err := fs.ReadFile(store.DefinitionFiles, file)
	if err != nil {
		t.Fatal(err)
	}
	var oldSignature string
	if err := db.Pool.QueryRow(ctx, `SELECT oid::regprocedure::text FROM pg_proc WHERE proname = 'replay_run_halt'`).Scan(&oldSignature); err != nil {
		t.Fatal(err)
	}
	// One more parameter, in the definition and its grants.
	content := strings.ReplaceAll(string(raw), "details jsonb)", "details jsonb, urgent boolean)")
	if content == string(raw) {
		t.Fatalf("%s has no parameter list ending in \"details jsonb)\":\n%s", file, raw)
	}
	res, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{file: content}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Dropped, []string{oldSignature}) {
		t.Errorf("dropped %v, want the old %s", res.Dropped, oldSignature)
	}
	var overloads int
	var operatorMay bool
	err = db.Pool.QueryRow(ctx, `SELECT count(*), bool_and(has_function_privilege('expiryctl_operator', oid, 'EXECUTE'))
		FROM pg_proc WHERE proname = 'replay_run_halt' AND pronamespace = 'expiryctl'::regnamespace`).Scan(&overloads, &operatorMay)
	if err != nil {
		t.Fatal(err)
	}
	if overloads != 1 || !operatorMay {
		t.Errorf("%d overloads of replay_run_halt, executable by operators: %v; want 1, true", overloads, operatorMay)
	}
}

// TestChangedResultMakesTheFunctionAnew: CREATE OR REPLACE cannot change a
// result type; the function is dropped and created from its file, with
// its grants.
func TestChangedResultMakesTheFunctionAnew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	const file = "functions/replay_canary_record.sql"
	raw, err := fs.ReadFile(store.DefinitionFiles, file)
	if err != nil {
		t.Fatal(err)
	}
	var result string
	if err := db.Pool.QueryRow(ctx, `SELECT pg_get_function_result(oid) FROM pg_proc WHERE proname = 'replay_canary_record'`).Scan(&result); err != nil {
		t.Fatal(err)
	}
	if result != "void" {
		t.Fatalf("replay_canary_record returns %s; the test expects void", result)
	}
	content := strings.Replace(string(raw), "RETURNS void", "RETURNS integer", 1)
	content = strings.Replace(content, "\nEND\n", "\n    RETURN 0;\nEND\n", 1)
	if _, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{file: content})); err != nil {
		t.Fatal(err)
	}
	var operatorMay bool
	err = db.Pool.QueryRow(ctx, `SELECT pg_get_function_result(oid), has_function_privilege('expiryctl_operator', oid, 'EXECUTE')
		FROM pg_proc WHERE proname = 'replay_canary_record'`).Scan(&result, &operatorMay)
	if err != nil {
		t.Fatal(err)
	}
	if result != "integer" || !operatorMay {
		t.Errorf("replay_canary_record returns %s, executable by operators: %v; want integer, true", result, operatorMay)
	}
}

// TestADropThatATableNeedsIsRefused: a function that a trigger or a
// column's default uses cannot be dropped by the definitions: migrate
// fails naming what depends on it, and changes nothing.
func TestADropThatATableNeedsIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	for _, c := range []struct {
		name  string
		edits map[string]string
		want  []string
	}{
		{"a trigger function's file removed", map[string]string{"functions/audit_refuse_change.sql": ""},
			[]string{"audit_refuse_change()", "no file of functions/ defines it", "trigger audit_log_no_update on table expiryctl.audit_log", "a numbered migration must first"}},
		{"a default's function with another result", map[string]string{"functions/audit_next_seq.sql": replaceIn(t,
			"functions/audit_next_seq.sql", "RETURNS bigint", "RETURNS integer")},
			[]string{"audit_next_seq()", "its result or parameters change in functions/audit_next_seq.sql", "default value for column seq of table expiryctl.audit_log"}},
	} {
		before := catalogVersions(t, db.Pool)
		_, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, c.edits))
		if err == nil {
			t.Errorf("%s: applied", c.name)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not say %q:\n%v", c.name, want, err)
			}
		}
		after := catalogVersions(t, db.Pool)
		for name, version := range before {
			if after[name] != version {
				t.Errorf("%s: %s changed though the migrate failed", c.name, name)
			}
		}
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("after the refused changes: %v", err)
	}
}

// TestBadDefinitionFilesAreRefused: each file defines the function it is
// named after and nothing else, and an error is reported at its file and
// line, or at the function whose body does not hold.
func TestBadDefinitionFilesAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	for _, c := range []struct {
		name  string
		edits map[string]string
		want  string
	}{
		{"a file named after no function it defines", map[string]string{
			"functions/stray.sql": "CREATE OR REPLACE FUNCTION expiryctl.other() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"},
			"functions/stray.sql writes function expiryctl.other()"},
		{"a file that defines nothing", map[string]string{"functions/empty.sql": "SELECT 1;\n"},
			"functions/empty.sql defines no function expiryctl.empty"},
		{"a file that grants on another's function", map[string]string{"functions/not_found.sql": replaceIn(t,
			"functions/not_found.sql", "FROM PUBLIC;", "FROM PUBLIC;\nGRANT EXECUTE ON FUNCTION expiryctl.refuse_text(text, text) TO expiryctl_auditor;")},
			"functions/not_found.sql writes function expiryctl.refuse_text(text,text)"},
		{"a syntax error", map[string]string{"functions/replay_cancel.sql": replaceIn(t,
			"functions/replay_cancel.sql", "BEGIN\n", "BEGIN\n    SELEC 1;\n")},
			"functions/replay_cancel.sql:"},
		{"a body that reads a table that is not there", map[string]string{
			"functions/ghost.sql": "CREATE OR REPLACE FUNCTION expiryctl.ghost() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM expiryctl.no_such_table $$;\n"},
			"the body of expiryctl.ghost()"},
		{"a file named in capitals", map[string]string{"functions/Loud.sql": "SELECT 1;\n"},
			"functions/Loud.sql: a definition file is named after the object it defines"},
	} {
		before := catalogVersions(t, db.Pool)
		_, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, c.edits))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
		if after := catalogVersions(t, db.Pool); len(after) != len(before) {
			t.Errorf("%s: %d functions after the failed migrate, %d before", c.name, len(after), len(before))
		}
	}
	// A syntax error is reported at the line it is on.
	content := replaceIn(t, "functions/replay_cancel.sql", "BEGIN\n", "BEGIN\n    SELEC 1;\n")
	before, _, _ := strings.Cut(content, "SELEC 1")
	line := 1 + strings.Count(before, "\n")
	_, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{"functions/replay_cancel.sql": content}))
	if want := "functions/replay_cancel.sql:" + strconv.Itoa(line) + ":"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a syntax error on line %d: %v; want it at %s", line, err, want)
	}
}

// TestViewsAreMadeAnewInTheirOrder: views/ files are applied after the
// functions, each after a view it reads whatever their names; a changed
// view may change its columns, and a removed file drops its view.
func TestViewsAreMadeAnewInTheirOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	base := `CREATE VIEW expiryctl.zz_letters_per_queue AS
    SELECT source_queue, count(*) AS letters FROM expiryctl.dead_letters GROUP BY source_queue;
GRANT SELECT ON expiryctl.zz_letters_per_queue TO expiryctl_auditor;
`
	// Sorts first, reads the other.
	busiest := `CREATE VIEW expiryctl.aa_busiest_queue AS
    SELECT source_queue FROM expiryctl.zz_letters_per_queue ORDER BY letters DESC LIMIT 1;
`
	res, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{
		"views/zz_letters_per_queue.sql": base, "views/aa_busiest_queue.sql": busiest}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replaced, []string{"views/aa_busiest_queue.sql", "views/zz_letters_per_queue.sql"}) {
		t.Errorf("replaced %v, want the two views", res.Replaced)
	}
	var auditorMay bool
	if err := db.Pool.QueryRow(ctx, `SELECT has_table_privilege('expiryctl_auditor', 'expiryctl.zz_letters_per_queue', 'SELECT')`).Scan(&auditorMay); err != nil || !auditorMay {
		t.Errorf("the auditor may read the view: %v (%v), want true", auditorMay, err)
	}

	// Another column in place of one: the view is made anew, and the one
	// that reads it too.
	changed := strings.Replace(base, "count(*) AS letters", "count(*) AS letters, max(id) AS newest", 1)
	if _, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{
		"views/zz_letters_per_queue.sql": changed, "views/aa_busiest_queue.sql": busiest})); err != nil {
		t.Fatal(err)
	}
	var columns int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = 'expiryctl' AND table_name = 'zz_letters_per_queue'`).Scan(&columns); err != nil || columns != 3 {
		t.Errorf("the changed view has %d columns (%v), want 3", columns, err)
	}

	res, err = store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{"views/zz_letters_per_queue.sql": changed}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Dropped, []string{"expiryctl.aa_busiest_queue"}) {
		t.Errorf("dropped %v, want the view whose file went", res.Dropped)
	}
	var views int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_views WHERE schemaname = 'expiryctl'`).Scan(&views); err != nil || views != 1 {
		t.Errorf("%d views (%v), want 1", views, err)
	}
}

// TestConcurrentMigratesApplyTheDefinitionsOnce: two hosts migrating at
// once to the same files: one applies them, the other finds them applied.
func TestConcurrentMigratesApplyTheDefinitionsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := definitionsDB(t)
	const file = "functions/replay_cancel.sql"
	edited := changedFiles(t, map[string]string{file: replaceIn(t, file, "BEGIN\n", "BEGIN\n    -- changed\n")})
	var wg sync.WaitGroup
	results := make([]store.DefinitionsResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := pgtest.Connect(t, pgtest.WithUser(db.URL, pgtest.Owner))
			results[i], errs[i] = store.ApplyDefinitionsFrom(ctx, pool, edited)
		}()
	}
	wg.Wait()
	var replaced int
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate %d: %v", i, err)
		}
		replaced += len(results[i].Replaced)
	}
	if replaced != 1 {
		t.Errorf("the two migrates replaced %d definitions between them (%v, %v), want 1", replaced, results[0].Replaced, results[1].Replaced)
	}
}

// TestMigrationBelowTheDefinitionsPutsBackTheReleasedFunctions: a
// database migrated with changed, added and removed definitions, then
// taken back down to 00020, has the schema 00020 gives: the functions as
// the release before the definitions shipped them.
func TestMigrationBelowTheDefinitionsPutsBackTheReleasedFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	released, releasedOwner := ownedEmptyDatabase(t)
	if err := store.MigrateTo(ctx, releasedOwner, 20); err != nil {
		t.Fatal(err)
	}
	want := dumpSchema(t, released)

	db, owner := ownedEmptyDatabase(t)
	if _, err := store.Migrate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	const purge, halt = "functions/purge_letters.sql", "functions/replay_run_halt.sql"
	edits := map[string]string{
		purge: replaceIn(t, purge, "a purge may redact only", "a purge redacts only"),
		halt:  strings.ReplaceAll(replaceIn(t, halt, "details jsonb)", "details jsonb)"), "details jsonb)", "details jsonb, urgent boolean)"),
		"functions/expiryctl_helper.sql": "CREATE OR REPLACE FUNCTION expiryctl.expiryctl_helper() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n" +
			"REVOKE ALL ON FUNCTION expiryctl.expiryctl_helper() FROM PUBLIC;\n",
		"functions/replay_discard_window.sql": "",
	}
	// A file that is gone cannot be dropped while its function is in use,
	// so the removed one is one nothing depends on.
	if _, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, edits)); err != nil {
		t.Fatal(err)
	}
	latest := store.LatestVersion()
	for _, bad := range []int64{latest, 99, -1} {
		if _, err := store.PlanDown(ctx, owner, bad); err == nil || !strings.Contains(err.Error(), "takes a version below it") {
			t.Errorf("PlanDown to %d: %v, want a refusal saying --down-to takes a version below the schema's", bad, err)
		}
	}
	above := len(versionsAbove(t, owner, 20))
	plan, err := store.PlanDown(ctx, owner, 20)
	if err != nil || len(plan) != above || plan[0].Version != latest || plan[len(plan)-1].Name != "00021_definitions_in_files" {
		t.Fatalf("PlanDown to 20 = %v, %v; want %d … 00021, newest first", plan, err, latest)
	}
	res, err := store.MigrateDown(ctx, owner, 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 20 || len(res.Undone) != above || res.FunctionsLeftOver() {
		t.Errorf("down to 20: version %d, undid %v, functions left over %v; want 20, %d … 00021, false", res.Version, res.Undone, res.FunctionsLeftOver(), latest)
	}
	if got := dumpSchema(t, db); got != want {
		t.Fatalf("down to 00020 after changed definitions leaves another schema than 00020 itself.\n%s", diffExcerpt(want, got, "00020", "down to 00020"))
	}
}

// TestUpgradeToDefinitionsKeepsTheArchive migrates a database of 00020
// with a letter in it: the letter stays, the functions are this
// release's, and a second migrate has nothing to do.
func TestUpgradeToDefinitionsKeepsTheArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := ownedEmptyDatabase(t)
	if err := store.MigrateTo(ctx, owner, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, oldIngest, []byte(`{"n":1}`), "expire:r-1:v1"); err != nil {
		t.Fatal(err)
	}
	var outdated *store.SchemaOutdatedError
	if err := store.CheckSchema(ctx, db.Pool); !errors.As(err, &outdated) || outdated.Have != 20 {
		t.Fatalf("CheckSchema of a 00020 database = %v, want outdated at 20", err)
	}
	res, err := store.Migrate(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	want := versionsAbove(t, owner, 20)
	if !slices.Equal(res.Applied, want) || len(res.Definitions.Replaced) != res.Definitions.Total {
		t.Errorf("the upgrade applied %v and %d of %d definitions; want %v and every definition", res.Applied, len(res.Definitions.Replaced), res.Definitions.Total, want)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	var letters int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters`).Scan(&letters); err != nil || letters != 1 {
		t.Fatalf("%d letters after the upgrade (%v), want 1", letters, err)
	}
	res, err = store.Migrate(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(res.Definitions.Replaced) != 0 {
		t.Errorf("a second migrate applied %v and %v, want nothing", res.Applied, res.Definitions.Replaced)
	}
}

// definitionsSince is the first migration after the one that moved the
// functions into files: from it on, no numbered migration defines one.
const definitionsSince = 22

var (
	sqlComment       = regexp.MustCompile(`--[^\n]*`)
	definesFunctions = regexp.MustCompile(`(?is)\b(CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|VIEW)|ALTER\s+(FUNCTION|PROCEDURE|VIEW|ROUTINE)|(GRANT|REVOKE)\s[^;]*\bON\s+(FUNCTION|PROCEDURE|ROUTINE|ALL\s+FUNCTIONS)|COMMENT\s+ON\s+(FUNCTION|PROCEDURE|VIEW))\b`)
)

// TestNumberedMigrationsDefineNoFunction keeps each function in one place:
// a numbered migration after 00021 may create, drop and alter tables,
// columns, indexes, triggers and grants on tables, and move data, but a
// function or view, its privileges and its comment are its file's.
func TestNumberedMigrationsDefineNoFunction(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		version, err := migrationVersion(file)
		if err != nil {
			t.Fatal(err)
		}
		if version < definitionsSince {
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if m := definesFunctions.FindString(sqlComment.ReplaceAllString(string(raw), "")); m != "" {
			t.Errorf("%s has %q: a function or view is defined once, in its file under store/functions/ (or views/), "+
				"which migrate applies after the numbered migrations; see store/doc.go", file, m)
		}
	}
	if !definesFunctions.MatchString("GRANT EXECUTE ON FUNCTION expiryctl.f() TO g") || !definesFunctions.MatchString("create or replace function x") {
		t.Fatal("the pattern no longer recognises a function's definition or grant")
	}
}

// TestAFileThatGrantsLessTakesItAway: CREATE OR REPLACE keeps a function's
// grants, so a file whose GRANT names fewer groups than its earlier form
// must still leave only those.
func TestAFileThatGrantsLessTakesItAway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, owner := definitionsDB(t)
	const file = "functions/purge_letters.sql"
	raw, err := fs.ReadFile(store.DefinitionFiles, file)
	if err != nil {
		t.Fatal(err)
	}
	content := strings.ReplaceAll(string(raw), "TO expiryctl_operator, expiryctl_admin;", "TO expiryctl_operator;")
	if content == string(raw) {
		t.Fatalf("%s does not grant operators and admins:\n%s", file, raw)
	}
	if _, err := store.ApplyDefinitionsFrom(ctx, owner, changedFiles(t, map[string]string{file: content})); err != nil {
		t.Fatal(err)
	}
	var operatorMay, adminMay bool
	if err := db.Pool.QueryRow(ctx, `SELECT has_function_privilege('expiryctl_operator', p.oid, 'EXECUTE'),
		has_function_privilege('expiryctl_admin', p.oid, 'EXECUTE')
		FROM pg_proc p WHERE p.proname = 'purge_letters' AND p.pronamespace = 'expiryctl'::regnamespace`).Scan(&operatorMay, &adminMay); err != nil {
		t.Fatal(err)
	}
	if !operatorMay || adminMay {
		t.Errorf("after a file granting operators only: operators may %v, admins may %v; want true, false", operatorMay, adminMay)
	}
}

// versionsAbove lists the embedded migrations numbered after version,
// oldest first, as the embedded migrations number them.
func versionsAbove(t *testing.T, pool *pgxpool.Pool, version int64) []int64 {
	t.Helper()
	migrations, err := store.OpenMigrations(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer migrations.Close()
	var above []int64
	for _, v := range migrations.Versions() {
		if v > version {
			above = append(above, v)
		}
	}
	return above
}
