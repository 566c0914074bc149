package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tableOwners names the one package that holds the SQL of each table: the
// only package whose code may write it or call the schema functions that
// do. A new table in schema.sql fails TestEachTableHasOneOwner until it is
// given an owner here.
var tableOwners = map[string]string{
	"dead_letters":                "deadletter",
	"dead_letter_states":          "deadletter",
	"dead_letter_tallies":         "deadletter",
	"dead_letter_class_tallies":   "deadletter",
	"dead_letter_due_tallies":     "deadletter",
	"dead_letter_arrival_tallies": "deadletter",
	"replay_requests":             "replay",
	"replay_runner_leases":        "replay",
	"replay_items":                "replay",
	"replay_outcomes":             "replay",
	"policy":                      "replay",
	"policy_changes":              "replay",
	"audit_log":                   "audit",
	"audit_chain":                 "audit",
	"audit_trail":                 "audit",
	"audit_tree":                  "audit",
	"audit_checkpoints":           "audit",
	"audit_count_leaves":          "audit",
	"audit_count_tree":            "audit",
	"schema_definitions":          "store",
	"schema_definitions_before":   "store",
	"schema_migrate_lock":         "store",
	"queue_systems":               "store",
}

// functionOwners names, by prefix, the package that calls each family of
// the schema's functions.
var functionOwners = []struct{ prefix, owner string }{
	{"ingest_letters", "deadletter"},
	{"purge_letters", "deadletter"},
	{"replay_", "replay"},
	{"work_queue_of", "replay"},
	{"policy_", "replay"},
	{"audit_", "audit"},
	{"access_change", "access"},
	{"schema_version", "store"},
	{"queue_systems_", "store"},
}

// crossReads are the reads of another package's table that stay in SQL
// because they must see one snapshot with the reader's own tables. Each may
// only read (FROM or JOIN), never write.
var crossReads = map[[2]string]string{
	{"replay", "dead_letters"}:       "the cohort's payloads and hashes that the approver sees, and the runner's item with its letter, are read in one snapshot with replay_items",
	{"replay", "dead_letter_states"}: "the runner's item with its letter's status, read in the same snapshot as the letter",
}

// sqlFiles are the only files of a package that may hold SQL.
var sqlFile = regexp.MustCompile(`^postgres[a-z_]*\.go$`)

// The packages whose SQL is checked: the product, not its simulation,
// benchmark or fixtures, which stage databases as a second client would.
var checkedRoots = []string{"access", "audit", "commands", "deadletter", "reconcile", "replay", "tui", "internal/adapter", "internal/service", "internal/view"}

var (
	schemaName = regexp.MustCompile(`\bexpiryctl\.([a-z_]+)\b`)
	readBefore = regexp.MustCompile(`(?i)\b(FROM|JOIN)\s+$`)
	sqlVerb    = regexp.MustCompile(`(?i)^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|COPY|VACUUM|ANALYZE|SET|LOCK|CREATE|ALTER|DROP)\b`)
)

// TestEachTableHasOneOwner reads the product's Go source and holds the
// layout's rule: a table's reads and writes live in its owning package,
// in that package's postgres*.go files, and nothing else writes it.
func TestEachTableHasOneOwner(t *testing.T) {
	root := moduleRoot(t)
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^CREATE TABLE expiryctl\.([a-z_]+)`).FindAllStringSubmatch(string(schema), -1) {
		if tableOwners[m[1]] == "" {
			t.Errorf("table %s has no owner: name the package that holds its SQL in tableOwners", m[1])
		}
	}

	for _, dir := range checkedRoots {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			checkFile(t, filepath.ToSlash(rel), path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkFile(t *testing.T, rel, path string) {
	t.Helper()
	pkg, name := filepath.ToSlash(filepath.Dir(rel)), filepath.Base(rel)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		text, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		at := rel + ":" + strconv.Itoa(fset.Position(lit.Pos()).Line)
		holdsSQL := false
		for _, m := range schemaName.FindAllStringSubmatchIndex(text, -1) {
			holdsSQL = true
			object := text[m[2]:m[3]]
			if owner, isTable := tableOwners[object]; isTable {
				checkTable(t, at, pkg, object, owner, readBefore.MatchString(text[:m[0]]))
				continue
			}
			checkFunction(t, at, pkg, object)
		}
		if (holdsSQL || sqlVerb.MatchString(text) && strings.Contains(text, "$1")) && pkg != "store" && !sqlFile.MatchString(name) {
			t.Errorf("%s holds SQL: a package's SQL belongs in its postgres*.go files, behind the interface the package declares", at)
		}
		return true
	})
}

func checkTable(t *testing.T, rel, pkg, table, owner string, isRead bool) {
	t.Helper()
	if pkg == owner {
		return
	}
	why, allowed := crossReads[[2]string{pkg, table}]
	switch {
	case !allowed:
		t.Errorf("%s uses %s, which %s owns: call %s's API instead", rel, table, owner, owner)
	case !isRead:
		t.Errorf("%s writes %s, which %s owns: only its owner writes a table (this package may only read it: %s)", rel, table, owner, why)
	}
}

func checkFunction(t *testing.T, rel, pkg, function string) {
	t.Helper()
	i := slices.IndexFunc(functionOwners, func(o struct{ prefix, owner string }) bool {
		return strings.HasPrefix(function, o.prefix)
	})
	switch {
	case i < 0:
		t.Errorf("%s calls expiryctl.%s, which has no owner: add it to functionOwners", rel, function)
	case functionOwners[i].owner != pkg:
		t.Errorf("%s calls expiryctl.%s, which %s owns: call %s's API instead", rel, function, functionOwners[i].owner, functionOwners[i].owner)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
