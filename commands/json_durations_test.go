package commands

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestNoJSONDurationIsNanoseconds walks the type of every value a command
// writes as JSON (writeJSON, json.Marshal) and fails on a time.Duration
// that encoding/json would write as nanoseconds under its field's name:
// every duration of -o json is in seconds, under a name that says so
// (approval_ttl_seconds), through a type with its own marshaller such as
// deadletter.Seconds. A struct with its own MarshalJSON is walked all the
// same, since expiryctl's are built on the fields' tags: its durations are
// tagged "-" and written as seconds by the marshaller.
func TestNoJSONDurationIsNanoseconds(t *testing.T) {
	t.Parallel()
	pkg, info, files, fset := typeCheckCommands(t)
	marshaler := types.NewInterfaceType([]*types.Func{types.NewFunc(token.NoPos, nil, "MarshalJSON",
		types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(
			types.NewVar(token.NoPos, nil, "", types.NewSlice(types.Typ[types.Byte])),
			types.NewVar(token.NoPos, nil, "", types.Universe.Lookup("error").Type())), false))}, nil).Complete()

	written := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var arg ast.Expr
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				if fun.Name == "writeJSON" && len(call.Args) == 2 {
					arg = call.Args[1]
				}
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok && x.Name == "json" && fun.Sel.Name == "Marshal" && len(call.Args) == 1 {
					arg = call.Args[0]
				}
			}
			if arg == nil {
				return true
			}
			written++
			where := fset.Position(call.Pos()).String()
			for _, typ := range writtenTypes(info, arg) {
				w := durationWalk{seen: map[types.Type]bool{}, marshaler: marshaler}
				for _, path := range w.walk(typ, typ.String()) {
					t.Errorf("%s: -o json writes a time.Duration as nanoseconds at %s: carry it in seconds under a _seconds name (deadletter.Seconds)", where, path)
				}
			}
			return true
		})
	}
	// The walk saw the commands' JSON: a rename of writeJSON must not make
	// this test pass by finding nothing.
	if written < 20 {
		t.Fatalf("found %d JSON writes in package %s, want every command's", written, pkg.Path())
	}
}

// writtenTypes are the types arg may hold: its static type, or, for a map
// literal of interface values (a document built in place), each value's.
func writtenTypes(info *types.Info, arg ast.Expr) []types.Type {
	if lit, ok := arg.(*ast.CompositeLit); ok {
		if m, ok := info.TypeOf(lit).Underlying().(*types.Map); ok && types.IsInterface(m.Elem()) {
			var out []types.Type
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					out = append(out, info.TypeOf(kv.Value))
				}
			}
			return out
		}
	}
	return []types.Type{info.TypeOf(arg)}
}

type durationWalk struct {
	seen      map[types.Type]bool
	marshaler *types.Interface
}

// walk returns the paths, from root, to each time.Duration encoding/json
// would write as a number of nanoseconds.
func (w durationWalk) walk(typ types.Type, path string) []string {
	if typ == nil || w.seen[typ] {
		return nil
	}
	w.seen[typ] = true
	if named, ok := typ.(*types.Named); ok {
		if obj := named.Obj(); obj.Pkg() != nil && obj.Pkg().Path() == "time" && obj.Name() == "Duration" {
			return []string{path}
		}
	}
	_, isStruct := typ.Underlying().(*types.Struct)
	if !isStruct && (types.Implements(typ, w.marshaler) || types.Implements(types.NewPointer(typ), w.marshaler)) {
		return nil
	}
	var found []string
	switch u := typ.Underlying().(type) {
	case *types.Pointer:
		found = w.walk(u.Elem(), path)
	case *types.Slice:
		found = w.walk(u.Elem(), path+"[]")
	case *types.Array:
		found = w.walk(u.Elem(), path+"[]")
	case *types.Map:
		found = w.walk(u.Elem(), path+"[…]")
	case *types.Struct:
		for i := range u.NumFields() {
			field := u.Field(i)
			tag, _, _ := strings.Cut(reflect.StructTag(u.Tag(i)).Get("json"), ",")
			if tag == "-" || (!field.Exported() && !field.Embedded()) {
				continue
			}
			name := field.Name()
			if tag != "" {
				name = tag
			}
			found = append(found, w.walk(field.Type(), path+"."+name)...)
		}
	}
	return found
}

// typeCheckCommands type-checks this package's own (non-test) files
// against the compiled export data of its imports, which `go list
// -export` names from the build cache.
func typeCheckCommands(t *testing.T) (*types.Package, *types.Info, []*ast.File, *token.FileSet) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(file)
	})
	ctx := build.Default
	bp, err := ctx.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	pkg, err := (&types.Config{Importer: imp}).Check("github.com/expiryctl/expiryctl/commands", fset, files, info)
	if err != nil {
		t.Fatalf("type-checking the commands: %v", err)
	}
	return pkg, info, files, fset
}
