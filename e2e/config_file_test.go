package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// connection is one connection of a test's configuration file: its system
// and its url, or for SQS its region and endpoint.
type connection struct {
	system, url      string
	region, endpoint string
}

// configFile writes a configuration whose one context, "test", names
// conns by name, readable by its owner alone, and returns its path.
func configFile(t testing.TB, conns map[string]connection) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("current-context: test\ncontexts:\n  test:\n    connections:\n")
	names := make([]string, 0, len(conns))
	for name := range conns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := conns[name]
		fmt.Fprintf(&b, "      %s:\n        system: %s\n", name, c.system)
		for _, kv := range [][2]string{{"url", c.url}, {"region", c.region}, {"endpoint", c.endpoint}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "        %s: %q\n", kv[0], kv[1])
			}
		}
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withConfig is c reading the configuration file at path.
func (c *cli) withConfig(path string) *cli {
	c.env = append(c.env, "EXPIRYCTL_CONFIG="+path)
	return c
}
