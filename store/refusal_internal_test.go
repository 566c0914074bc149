package store

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestFunctionRolesAreTheFilesGrants holds functionRoles, which names the
// group a refused EXECUTE needed, to the GRANT of each definition file that
// grants some of the groups and not all.
func TestFunctionRolesAreTheFilesGrants(t *testing.T) {
	grant := regexp.MustCompile(`(?m)^GRANT EXECUTE ON FUNCTION expiryctl\.(\w+)\(.*\) TO ([^;]+);`)
	files, err := fs.Glob(definitionFiles, "functions/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range files {
		raw, err := fs.ReadFile(definitionFiles, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range grant.FindAllStringSubmatch(string(raw), -1) {
			groups := strings.Split(m[2], ", ")
			if len(groups) == len(Groups) {
				continue
			}
			roles := make([]string, len(groups))
			for i, g := range groups {
				roles[i] = strings.TrimPrefix(g, groupPrefix)
			}
			want[m[1]] = strings.Join(roles, " or ")
		}
	}
	for name, roles := range want {
		if got := functionRoles[name]; got != roles {
			t.Errorf("functionRoles[%q] = %q, but functions/%s.sql grants it to %s", name, got, name, roles)
		}
	}
	for name := range functionRoles {
		if _, ok := want[name]; !ok {
			t.Errorf("functionRoles names %s, which no file grants to some groups only", name)
		}
	}
}
