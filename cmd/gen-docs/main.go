// Command gen-docs writes the command reference from the cobra tree, so
// that it cannot drift from the binary: Markdown pages for docs/reference
// (`make docs`), or with -man the man pages a release ships (`make
// release`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra/doc"

	"github.com/expiryctl/expiryctl/commands"
)

func main() {
	man := flag.Bool("man", false, "write man pages (section 1) instead of Markdown")
	source := flag.String("source", "expiryctl", "the man pages' source line, e.g. \"expiryctl v1.2.0\"")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gen-docs [-man [-source TEXT]] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if *man {
		err = generateMan(flag.Arg(0), *source, os.Getenv("SOURCE_DATE_EPOCH"))
	} else {
		err = generate(flag.Arg(0))
	}
	if err != nil {
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

// generateMan writes one man page per command into dir. Their date is the
// commit's (epoch, SOURCE_DATE_EPOCH's seconds), in UTC: a release built
// twice from one commit ships the same bytes, whatever the clock or the
// zone of the machine. Without an epoch the date is today's, as cobra
// has it: fine for reading, not for a release.
func generateMan(dir, source, epoch string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: "EXPIRYCTL", Section: "1", Source: source, Manual: "expiryctl manual"}
	if epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds: %w", epoch, err)
		}
		date := time.Unix(secs, 0).UTC()
		header.Date = &date
	}
	root := commands.NewCmdRoot(commands.NewFactory())
	root.DisableAutoGenTag = true
	return doc.GenManTree(root, header, dir)
}
