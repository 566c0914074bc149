package layout_test

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/expiryctl/expiryctl"

// floors are the module's folders from the top floor down, as the README's
// layout table lists them. A package may import packages of its own folder
// and of any folder on a lower floor, never one on its floor or above:
// folders on one floor are beside each other, not on top. A folder not
// listed fails the test until it is given a floor.
var floors = [][]string{
	{"cmd"},
	{"bench"},
	{"commands"},
	{"tui"},
	{"internal/fixture"},
	{"internal/service"},
	{"internal/adapter", "internal/view", "internal/sim", "internal/layout"},
	{"reconcile"},
	{"replay"},
	{"deadletter", "access"},
	{"audit", "approval"},
	{"store"},
	{"dsn", "release", "config"},
}

// TestFoldersImportOnlyDownward reads every package's imports (its code's,
// not its tests', which may reach anywhere) and fails on an import that
// runs sideways or back up: a folder that the domain imports must not
// import the domain, or the folders stop being layers.
func TestFoldersImportOnlyDownward(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var packages int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if pkg == "e2e" || pkg == fields[0] {
			continue // the end-to-end tests run the binary, and import nothing from here but fixtures
		}
		packages++
		floor, folder := floorOf(pkg)
		if floor < 0 {
			t.Errorf("package %s is in no floor's folder: give its folder a floor in floors (and a row in the README's layout table)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			depFloor, depFolder := floorOf(dep)
			if depFolder == folder || depFloor > floor {
				continue
			}
			t.Errorf("%s (floor of %s) imports %s (floor of %s): an import runs down only; move the code that needs it, "+
				"or the types both need, to a floor below both", pkg, folder, dep, depFolder)
		}
	}
	if packages < 30 {
		t.Fatalf("checked %d packages: go list found less than the module has", packages)
	}
}

// floorOf is the floor (0 at the top) and folder of a package path, -1 when
// no floor holds it.
func floorOf(pkg string) (int, string) {
	best, bestFolder := -1, ""
	for i, folders := range floors {
		for _, folder := range folders {
			if (pkg == folder || strings.HasPrefix(pkg, folder+"/")) && len(folder) > len(bestFolder) {
				best, bestFolder = i, folder
			}
		}
	}
	return best, bestFolder
}

var (
	fileName = regexp.MustCompile(`\b((?:[a-z0-9_]+/)*[a-z0-9_]+\.go)\b`)
	fileGlob = regexp.MustCompile(`\b([a-z0-9_]+)\*\.go\b`)
)

// TestPackageDocsNameTheirFiles holds a package doc that names files to
// the files there are: each name is a file (a bare name one of the
// package's own, a path one of the module's), and a doc that says where a
// family of files is (run*.go) and then lists some names every one.
func TestPackageDocsNameTheirFiles(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	var docs int
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "doc.go" {
			return nil
		}
		docs++
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		rel, _ := filepath.Rel(root, p)
		own := goFiles(t, dir)
		named := map[string]bool{}
		for _, m := range fileName.FindAllStringSubmatch(string(raw), -1) {
			name := m[1]
			if strings.Contains(name, "/") {
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil {
					t.Errorf("%s names %s, which is not a file of the module", rel, name)
				}
				continue
			}
			named[name] = true
			if !slices.Contains(own, name) {
				t.Errorf("%s names %s, which is not a file of its package", rel, name)
			}
		}
		for _, m := range fileGlob.FindAllStringSubmatch(string(raw), -1) {
			var listed, missing []string
			for _, f := range own {
				if ok, _ := path.Match(m[1]+"*.go", f); !ok {
					continue
				}
				if named[f] {
					listed = append(listed, f)
				} else {
					missing = append(missing, f)
				}
			}
			if len(listed) > 0 && len(missing) > 0 {
				t.Errorf("%s lists the files of %s*.go but not %s", rel, m[1], strings.Join(missing, ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if docs < 10 {
		t.Fatalf("read %d package docs: the walk missed the module", docs)
	}
}

// goFiles are the names of the package's files in dir, tests left out.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	return names
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
