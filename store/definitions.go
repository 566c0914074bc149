package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// definitionFiles are the schema's functions, one file each, named after
// the function it defines. A folder views/ beside functions/ will hold the
// views, one file each, when the schema has its first; applyDefinitions
// already reads it.
//
//go:embed functions/*.sql
var definitionFiles embed.FS

// definitionsTable records which form of each definition file a database
// runs: its kind, its name and the sha256 of the file.
const definitionsTable = Schema + ".schema_definitions"

// Kinds of definition, and the folder of each.
const (
	kindFunction = "function"
	kindView     = "view"
)

var definitionFolders = []struct{ kind, folder string }{
	{kindFunction, "functions"},
	{kindView, "views"},
}

// definition is one file of functions/ or views/.
type definition struct {
	kind, name string
	sql        string
	sum        [sha256.Size]byte
}

// file is the definition's path, as a reader finds it under store/.
func (d definition) file() string {
	for _, f := range definitionFolders {
		if f.kind == d.kind {
			return path.Join(f.folder, d.name+".sql")
		}
	}
	return d.name + ".sql"
}

// DefinitionsResult says what one ApplyDefinitions changed.
type DefinitionsResult struct {
	// Total is the number of definition files this binary holds.
	Total int
	// Replaced names the files (functions/NAME.sql, views/NAME.sql) whose
	// form the database did not run yet: new, or changed since they were
	// last applied. Empty when the database already ran every file as it
	// is, in which case nothing was written.
	Replaced []string
	// Dropped are the functions and views of the schema that no file
	// defines any more (a removed file, or a changed signature's old
	// overload), dropped by this run.
	Dropped []string
}

// readDefinitions reads every definition file of fsys, sorted by kind and
// name.
func readDefinitions(fsys fs.FS) ([]definition, error) {
	var defs []definition
	for _, f := range definitionFolders {
		names, err := fs.Glob(fsys, f.folder+"/*.sql")
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		for _, name := range names {
			raw, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, err
			}
			base := strings.TrimSuffix(path.Base(name), ".sql")
			if !validDefinitionName(base) {
				return nil, fmt.Errorf("%s: a definition file is named after the object it defines, in lower case (NAME.sql)", name)
			}
			defs = append(defs, definition{kind: f.kind, name: base, sql: string(raw), sum: sha256.Sum256(raw)})
		}
	}
	return defs, nil
}

func validDefinitionName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// definitionsDigest is a hex sha256 over every definition's kind, name and
// sum, as CheckSchema computes it from definitionsTable in SQL: the lines
// "kind/name sum\n" in byte order.
func definitionsDigest(defs []definition) string {
	lines := make([]string, len(defs))
	for i, d := range defs {
		lines[i] = d.kind + "/" + d.name + " " + hex.EncodeToString(d.sum[:]) + "\n"
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	return hex.EncodeToString(sum[:])
}

// digestOfRecordedDefinitions is the SQL of definitionsDigest over what
// definitionsTable records.
const digestOfRecordedDefinitions = `SELECT encode(sha256(convert_to(coalesce(string_agg(
		kind || '/' || name || ' ' || encode(sha256, 'hex') || E'\n', '' ORDER BY kind || '/' || name COLLATE "C"), ''), 'UTF8')), 'hex')
	FROM ` + definitionsTable

// ApplyDefinitions makes the schema's functions and views exactly what this
// binary's definition files say, when the database runs another form of
// them; Migrate calls it after the numbered migrations. When every file is
// recorded with its current sha256 it writes nothing. Otherwise, in one
// transaction: every file is applied (CREATE OR REPLACE, so a caller in
// another session is never left without the function), a function whose
// result or parameter names changed is dropped and created anew, the
// functions and views no file defines any more are dropped, every
// function body is validated, and the files' sums are recorded. Anything
// that cannot be done — a file with an error, or a drop that a table's
// trigger or default depends on — rolls all of it back and names the file
// or the dependent object.
//
// The files name the unnamed deployment's groups; they are applied
// rendered for the deployment the schema serves (ReadDeployment), and the
// sums recorded are of the rendered form.
func ApplyDefinitions(ctx context.Context, pool *pgxpool.Pool) (DefinitionsResult, error) {
	d, err := ReadDeployment(ctx, pool)
	if err != nil {
		return DefinitionsResult{}, fmt.Errorf("migrate: %w", err)
	}
	return applyDefinitions(ctx, pool, renderedFS{definitionFiles, d})
}

func applyDefinitions(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (DefinitionsResult, error) {
	defs, err := readDefinitions(fsys)
	if err != nil {
		return DefinitionsResult{}, fmt.Errorf("migrate: read the definition files: %w", err)
	}
	res := DefinitionsResult{Total: len(defs)}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// EXCLUSIVE lets CheckSchema's reads through and holds off another
		// migrate; a login that may only read the table cannot take a
		// mode that would block this one.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+definitionsTable+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("migrate: lock %s: %w", definitionsTable, err)
		}
		recorded, err := recordedDefinitions(ctx, tx)
		if err != nil {
			return err
		}
		for _, d := range defs {
			if sum, ok := recorded[d.kind+"/"+d.name]; !ok || sum != d.sum {
				res.Replaced = append(res.Replaced, d.file())
			}
		}
		if len(res.Replaced) == 0 && len(recorded) == len(defs) {
			return nil
		}
		res.Dropped, err = replaceDefinitions(ctx, tx, defs)
		if err != nil {
			return err
		}
		return recordDefinitions(ctx, tx, defs)
	})
	if err != nil {
		return DefinitionsResult{Total: len(defs)}, err
	}
	return res, nil
}

func recordedDefinitions(ctx context.Context, tx pgx.Tx) (map[string][sha256.Size]byte, error) {
	rows, err := tx.Query(ctx, `SELECT kind || '/' || name, sha256 FROM `+definitionsTable)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", definitionsTable, err)
	}
	recorded := map[string][sha256.Size]byte{}
	for rows.Next() {
		var key string
		var sum []byte
		if err := rows.Scan(&key, &sum); err != nil {
			return nil, err
		}
		recorded[key] = [sha256.Size]byte(sum)
	}
	return recorded, rows.Err()
}

func recordDefinitions(ctx context.Context, tx pgx.Tx, defs []definition) error {
	kinds, names, sums := make([]string, len(defs)), make([]string, len(defs)), make([][]byte, len(defs))
	for i, d := range defs {
		kinds[i], names[i], sums[i] = d.kind, d.name, d.sum[:]
	}
	_, err := tx.Exec(ctx, `DELETE FROM `+definitionsTable)
	if err == nil {
		_, err = tx.Exec(ctx, `INSERT INTO `+definitionsTable+` (kind, name, sha256)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])`, kinds, names, sums)
	}
	if err != nil {
		return fmt.Errorf("migrate: record the definitions applied: %w", err)
	}
	return nil
}

// schemaObject is a function or view of the schema as pg_catalog has it.
// version is the catalog row's xmin, which any CREATE OR REPLACE, ALTER or
// GRANT of the object moves, so that comparing it before and after tells
// which objects this transaction wrote.
type schemaObject struct {
	kind, name, signature string
	version               string
}

// schemaObjects lists the schema's functions (extensions' excepted) and
// views by oid.
func schemaObjects(ctx context.Context, tx pgx.Tx) (map[uint32]schemaObject, error) {
	rows, err := tx.Query(ctx, `
		SELECT p.oid, 'function', p.proname, p.oid::regprocedure::text, p.xmin::text
		  FROM pg_proc p
		 WHERE p.pronamespace = $1::regnamespace
		   AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid AND e.deptype = 'e')
		UNION ALL
		SELECT c.oid, 'view', c.relname, c.oid::regclass::text, c.xmin::text
		  FROM pg_class c
		 WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'v'`, Schema)
	if err != nil {
		return nil, fmt.Errorf("migrate: list the schema's functions and views: %w", err)
	}
	objects := map[uint32]schemaObject{}
	for rows.Next() {
		var oid uint32
		var o schemaObject
		if err := rows.Scan(&oid, &o.kind, &o.name, &o.signature, &o.version); err != nil {
			return nil, err
		}
		objects[oid] = o
	}
	return objects, rows.Err()
}

// written are the objects of now that are new or changed since before.
func written(before, now map[uint32]schemaObject) map[uint32]schemaObject {
	out := map[uint32]schemaObject{}
	for oid, o := range now {
		if b, ok := before[oid]; !ok || b.version != o.version {
			out[oid] = o
		}
	}
	return out
}

// replaceDefinitions applies every file in tx and drops what none of them
// defines, returning the dropped objects' signatures.
func replaceDefinitions(ctx context.Context, tx pgx.Tx, defs []definition) ([]string, error) {
	// A body is checked once every function exists (validateFunctions), so
	// that one function's file may call another's, whatever their order.
	if _, err := tx.Exec(ctx, `SET LOCAL check_function_bodies = off`); err != nil {
		return nil, err
	}
	before, err := schemaObjects(ctx, tx)
	if err != nil {
		return nil, err
	}
	// Views are made anew, after the functions they may call: a view
	// cannot change its columns in place, and nothing outside the files
	// may depend on one (the DROP says who does, if something does).
	if err := dropViews(ctx, tx, before); err != nil {
		return nil, err
	}
	done := map[uint32]bool{}
	for _, d := range defs {
		if d.kind != kindFunction {
			continue
		}
		if err := applyFunction(ctx, tx, d, done); err != nil {
			return nil, err
		}
	}
	var views []definition
	for _, d := range defs {
		if d.kind == kindView {
			views = append(views, d)
		}
	}
	if err := applyViews(ctx, tx, views, done); err != nil {
		return nil, err
	}
	now, err := schemaObjects(ctx, tx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for oid, o := range now {
		if o.kind == kindFunction && !done[oid] {
			if err := dropObject(ctx, tx, o, "no file of functions/ defines it any more"); err != nil {
				return nil, err
			}
			dropped = append(dropped, o.signature)
		}
	}
	slices.Sort(dropped)
	for _, o := range before {
		if o.kind == kindView && !slices.ContainsFunc(views, func(d definition) bool { return d.name == o.name }) {
			dropped = append(dropped, o.signature)
		}
	}
	if err := validateFunctions(ctx, tx, defs); err != nil {
		return nil, err
	}
	return dropped, nil
}

func dropViews(ctx context.Context, tx pgx.Tx, objects map[uint32]schemaObject) error {
	var names []string
	for _, o := range objects {
		if o.kind == kindView {
			names = append(names, o.signature)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	// One statement drops views that read each other; anything else that
	// reads one refuses it, and the error names it.
	if _, err := tx.Exec(ctx, `DROP VIEW `+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("migrate: the views are made anew from views/, but %s", dependentsError(err))
	}
	return nil
}

// applyFunction runs one file of functions/ and marks what it wrote in
// done. A file may only define functions of its own name: another's would
// be defined twice.
func applyFunction(ctx context.Context, tx pgx.Tx, d definition, done map[uint32]bool) error {
	// Before seen: a revoke rewrites the function's row, which is not the
	// file writing it.
	if err := revokeExecute(ctx, tx, d.name); err != nil {
		return err
	}
	seen, err := schemaObjects(ctx, tx)
	if err != nil {
		return err
	}
	err = execInSavepoint(ctx, tx, d)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P13" || pgErr.Code == "42809") {
		// CREATE OR REPLACE cannot change a function's result type, its
		// parameters' names or defaults, or make it a procedure: the old
		// form is dropped and the file runs again.
		for oid, o := range seen {
			if o.kind == kindFunction && o.name == d.name && !done[oid] {
				if err := dropObject(ctx, tx, o, "its result or parameters change in "+d.file()); err != nil {
					return err
				}
			}
		}
		err = execInSavepoint(ctx, tx, d)
	}
	if err != nil {
		return err
	}
	return markWritten(ctx, tx, d, seen, done)
}

// revokeExecute takes EXECUTE on the functions named name from every role
// but their owner: the file says who may execute its function, and CREATE
// OR REPLACE keeps what an earlier form granted, so a file that grants less
// would otherwise take nothing away. In the applying transaction, no
// caller sees the function without its grants.
func revokeExecute(ctx context.Context, tx pgx.Tx, name string) error {
	rows, err := tx.Query(ctx, `SELECT format('REVOKE ALL ON FUNCTION %I.%I(%s) FROM %s', n.nspname, p.proname,
			pg_get_function_identity_arguments(p.oid), string_agg(quote_ident(r.rolname), ', ' ORDER BY r.rolname))
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		CROSS JOIN LATERAL aclexplode(p.proacl) a JOIN pg_roles r ON r.oid = a.grantee
		WHERE n.nspname = $1 AND p.proname = $2 AND a.grantee <> p.proowner
		GROUP BY n.nspname, p.proname, p.oid`, Schema, name)
	if err != nil {
		return fmt.Errorf("migrate: read who may execute %s: %w", name, err)
	}
	revokes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, r := range revokes {
		if _, err := tx.Exec(ctx, r); err != nil {
			return fmt.Errorf("migrate: %s: %w", r, err)
		}
	}
	return nil
}

// markWritten marks in done what d wrote since seen, and fails when that
// is not exactly objects of d's kind and name.
func markWritten(ctx context.Context, tx pgx.Tx, d definition, seen map[uint32]schemaObject, done map[uint32]bool) error {
	now, err := schemaObjects(ctx, tx)
	if err != nil {
		return err
	}
	var own int
	for oid, o := range written(seen, now) {
		if o.kind != d.kind || o.name != d.name {
			return fmt.Errorf("migrate: %s writes %s %s: a file defines only what it is named after, and %s has a file of its own",
				d.file(), o.kind, o.signature, o.name)
		}
		done[oid] = true
		own++
	}
	if own == 0 {
		return fmt.Errorf("migrate: %s defines no %s %s.%s: a file defines the %s it is named after", d.file(), d.kind, Schema, d.name, d.kind)
	}
	return nil
}

// execInSavepoint runs d's file in a savepoint of tx, so that tx goes on
// after an error the caller can mend.
func execInSavepoint(ctx context.Context, tx pgx.Tx, d definition) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := execDefinition(ctx, sp, d); err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// applyViews runs the files of views/, each after the views it reads: a
// file that names a relation not made yet is tried again after the others.
func applyViews(ctx context.Context, tx pgx.Tx, views []definition, done map[uint32]bool) error {
	for pending := views; len(pending) > 0; {
		var later []definition
		var lastErr error
		for _, d := range pending {
			seen, err := schemaObjects(ctx, tx)
			if err != nil {
				return err
			}
			err = execInSavepoint(ctx, tx, d)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
				later, lastErr = append(later, d), err
				continue
			}
			if err != nil {
				return err
			}
			if err := markWritten(ctx, tx, d, seen, done); err != nil {
				return err
			}
		}
		if len(later) == len(pending) {
			return lastErr
		}
		pending = later
	}
	return nil
}

// execDefinition runs a file's statements, reporting an error at its file
// and line.
func execDefinition(ctx context.Context, q Querier, d definition) error {
	// Without arguments pgx sends the file as one simple query, so that it
	// may hold several statements (the definition and its grants).
	_, err := q.Exec(ctx, d.sql)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Position > 0 {
		line := 1 + strings.Count(prefixRunes(d.sql, int(pgErr.Position)-1), "\n")
		return fmt.Errorf("migrate: %s:%d: %w", d.file(), line, err)
	}
	return fmt.Errorf("migrate: %s: %w", d.file(), err)
}

// prefixRunes is the first n characters of s (PostgreSQL counts an error's
// position in characters).
func prefixRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func dropObject(ctx context.Context, tx pgx.Tx, o schemaObject, why string) error {
	verb := "DROP FUNCTION "
	if o.kind == kindView {
		verb = "DROP VIEW "
	}
	if _, err := tx.Exec(ctx, verb+o.signature); err != nil {
		return fmt.Errorf("migrate: %s %s is dropped because %s, but %s", o.kind, o.signature, why, dependentsError(err))
	}
	return nil
}

// dependentsError says what stopped a drop: PostgreSQL's detail lists the
// objects that depend on it, one a line.
func dependentsError(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "2BP01" {
		return strings.ReplaceAll(pgErr.Detail, "\n", "; ") +
			": a numbered migration must first drop or change what depends on it (see store/doc.go)"
	}
	return err.Error()
}

// validateFunctions checks every function body of the schema as CREATE
// would with check_function_bodies on, now that all of them exist.
func validateFunctions(ctx context.Context, tx pgx.Tx, defs []definition) error {
	rows, err := tx.Query(ctx, `SELECT p.oid, p.proname, p.oid::regprocedure::text, l.lanname
		  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		 WHERE p.pronamespace = $1::regnamespace AND l.lanname IN ('plpgsql', 'sql')
		   AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid AND e.deptype = 'e')
		 ORDER BY 2`, Schema)
	if err != nil {
		return err
	}
	type function struct {
		oid                       uint32
		name, signature, language string
	}
	functions, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (function, error) {
		var f function
		return f, row.Scan(&f.oid, &f.name, &f.signature, &f.language)
	})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL check_function_bodies = on`); err != nil {
		return err
	}
	for _, f := range functions {
		validator := "pg_catalog.plpgsql_validator"
		if f.language == "sql" {
			validator = "pg_catalog.fmgr_sql_validator"
		}
		if _, err := tx.Exec(ctx, `SELECT `+validator+`($1)`, f.oid); err != nil {
			return fmt.Errorf("migrate: %sthe body of %s: %w", bodyErrorLine(defs, f.name, err), f.signature, err)
		}
	}
	return nil
}

// bodyErrorLine is "FILE:LINE: " for an error in the body of function
// name, when the error says where in the body it is: a body is the text
// between its file's dollar quotes, word for word.
func bodyErrorLine(defs []definition, name string, err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.InternalPosition <= 0 || pgErr.InternalQuery == "" {
		return ""
	}
	for _, d := range defs {
		if d.kind != kindFunction || d.name != name {
			continue
		}
		at := strings.Index(d.sql, pgErr.InternalQuery)
		if at < 0 {
			return d.file() + ": "
		}
		before := d.sql[:at] + prefixRunes(pgErr.InternalQuery, int(pgErr.InternalPosition)-1)
		return fmt.Sprintf("%s:%d: ", d.file(), 1+strings.Count(before, "\n"))
	}
	return ""
}
