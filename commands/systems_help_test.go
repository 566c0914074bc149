package commands

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/registry"
)

// TestHelpNamesEverySystem holds the help that says how systems differ to
// naming each registered system, within 80 columns: a new system's driver
// is named there without anyone editing the text.
func TestHelpNamesEverySystem(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"expiryctl --help":         rootHelp(),
		"dlq --help":               dlqHelp(),
		"replay request (where)":   whereHelp(),
		"replay request (handler)": handlerHelp(),
		"replay plan":              planSystemsHelp(),
	} {
		flat := strings.Join(strings.Fields(text), " ")
		for _, d := range registry.Drivers() {
			if title := d.Words().Title; !strings.Contains(flat, title) {
				t.Errorf("%s does not name %s:\n%s", name, title, text)
			}
		}
		for _, line := range strings.Split(text, "\n") {
			if len([]rune(line)) > 80 {
				t.Errorf("%s has a line wider than 80 columns: %q", name, line)
			}
		}
	}
}
