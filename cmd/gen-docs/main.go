// Command gen-docs writes the command reference in Markdown from the cobra
// tree, so that docs/reference cannot drift from the binary.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra/doc"

	"github.com/expiryctl/expiryctl/commands"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen-docs DIR")
		os.Exit(2)
	}
	if err := generate(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// generate writes one Markdown page per command into dir, replacing the
// pages a previous run wrote.
func generate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "expiryctl*.md"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	root := commands.NewCmdRoot(commands.NewFactory())
	root.DisableAutoGenTag = true
	link := func(name string) string { return strings.ToLower(name) }
	return doc.GenMarkdownTreeCustom(root, dir, func(string) string { return "" }, link)
}
