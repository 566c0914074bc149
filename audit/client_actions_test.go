package audit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/audit"
)

// TestClientActionsAreAuditAppends holds the Go lists to the function's
// text: the first IN list of audit_append is ClientActions, the second
// ReservedActions and RefusalActions, the third (normalised) ReservedActions.
func TestClientActionsAreAuditAppends(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "store", "functions", "audit_append.sql"))
	if err != nil {
		t.Fatal(err)
	}
	lists := regexp.MustCompile(`(?s)IN \(('[a-z_.]+'(?:,\s*'[a-z_.]+')+)\)`).FindAllStringSubmatch(string(raw), -1)
	var got [][]string
	for _, l := range lists {
		var names []string
		for _, q := range strings.Split(l[1], ",") {
			names = append(names, strings.Trim(strings.TrimSpace(q), "'"))
		}
		if len(names) > 3 { // the outcome lists are not actions
			got = append(got, names)
		}
	}
	want := [][]string{audit.ClientActions, append(slices.Clone(audit.ReservedActions), audit.RefusalActions...), audit.ReservedActions}
	if len(got) != len(want) {
		t.Fatalf("audit_append.sql has %d action lists, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("audit_append.sql's action list %d is\n%v\nwant (audit/client_actions.go)\n%v", i+1, got[i], want[i])
		}
	}
}
