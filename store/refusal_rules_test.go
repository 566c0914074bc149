package store_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryRuleIsDocumented: every rule a refusal can name, raised by the
// schema (replay_refuse, refuse_text) or by expiryctl itself (refuse,
// Refusal{Rule: …}), has a row in docs/governance.md's table of rules, so
// that the rule an operator is refused by is one they can look up.
func TestEveryRuleIsDocumented(t *testing.T) {
	t.Parallel()
	root := ".."
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	raised := map[string]string{}
	for _, m := range regexp.MustCompile(`(?:replay_refuse|refuse_text)\('([a-z-]+)'`).FindAllStringSubmatch(string(schema), -1) {
		raised[m[1]] = "schema.sql"
	}
	goRule := regexp.MustCompile(`(?:\brefuse\(|Refusal\{Rule: )"([a-z-]+)"`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "fixture" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range goRule.FindAllStringSubmatch(string(src), -1) {
			raised[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(raised) < 20 {
		t.Fatalf("found only %d rules: the patterns no longer match how refusals are raised", len(raised))
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "governance.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = true
		}
	}
	var missing []string
	for rule, where := range raised {
		if !documented[rule] {
			missing = append(missing, rule+" (raised in "+where+")")
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("docs/governance.md's rules do not list %s", m)
	}
}
