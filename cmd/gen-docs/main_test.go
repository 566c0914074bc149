package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsCurrent fails when docs/reference no longer matches the
// command tree: run `make docs` and commit the result.
func TestReferenceIsCurrent(t *testing.T) {
	fresh := t.TempDir()
	if err := generate(fresh); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "docs", "reference")
	want, _ := filepath.Glob(filepath.Join(fresh, "*.md"))
	have, _ := filepath.Glob(filepath.Join(committed, "*.md"))
	if len(want) != len(have) {
		t.Fatalf("docs/reference has %d pages, the command tree %d: run `make docs`", len(have), len(want))
	}
	for _, page := range want {
		got, err := os.ReadFile(filepath.Join(committed, filepath.Base(page)))
		if err != nil {
			t.Fatalf("%s is missing from docs/reference: run `make docs`", filepath.Base(page))
		}
		exp, _ := os.ReadFile(page)
		if string(got) != string(exp) {
			t.Fatalf("docs/reference/%s is out of date: run `make docs`", filepath.Base(page))
		}
	}
}
