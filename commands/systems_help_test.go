package commands

import (
	"context"
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

// TestPlanFlowSaysWhatASystemShows holds the plan's flow to the system
// that holds a queue: a system whose live view measures no traffic says
// so in its own name, and nothing is asked of the measured flow.
func TestPlanFlowSaysWhatASystemShows(t *testing.T) {
	t.Parallel()
	for _, s := range registry.JobStores() {
		if s.Traits().Rates {
			continue
		}
		queue := s.Traits().QueuePrefix + "conn/q"
		f, err := systemFlow{}.QueueFlow(context.Background(), queue)
		if err != nil || !strings.HasPrefix(f.Unavailable, s.Words().Title+" shows no traffic") {
			t.Errorf("the plan's flow of %s: %+v, %v; want %s's words that it shows no traffic", queue, f, err, s.Words().Title)
		}
	}
	if f, _ := (systemFlow{}).QueueFlow(context.Background(), "reservation-expiry"); f.Unavailable != "not configured" {
		t.Errorf("a measured system without a flow: %+v, want not configured", f)
	}
}
