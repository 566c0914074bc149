package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestManPagesAreReproducible: two runs on one epoch write the same pages,
// dated by the epoch in UTC, whatever the machine's clock.
func TestManPagesAreReproducible(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, dir := range []string{first, second} {
		if err := generateMan(dir, "expiryctl v1.2.3", "1764547200"); err != nil {
			t.Fatal(err)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(first, "*.1"))
	if len(pages) < 10 {
		t.Fatalf("%d man pages, want one per command", len(pages))
	}
	for _, page := range pages {
		a, _ := os.ReadFile(page)
		b, err := os.ReadFile(filepath.Join(second, filepath.Base(page)))
		if err != nil || string(a) != string(b) {
			t.Fatalf("%s differs between two runs (%v)", filepath.Base(page), err)
		}
	}
	root, _ := os.ReadFile(filepath.Join(first, "expiryctl.1"))
	if !strings.Contains(string(root), `"Dec 2025"`) || !strings.Contains(string(root), `"expiryctl v1.2.3"`) {
		t.Errorf("expiryctl.1's header does not carry the epoch's date and the source:\n%s", string(root)[:min(300, len(root))])
	}
}
