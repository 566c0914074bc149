package registry_test

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver/drivertest"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
)

// TestEveryDriverConforms runs the cases of the conformance suite that
// need no server on every registered driver; each job store runs the
// rest in its own package, on its own server.
func TestEveryDriverConforms(t *testing.T) {
	for _, d := range registry.Drivers() {
		t.Run(string(d.Traits().System), func(t *testing.T) { drivertest.Run(t, d) })
	}
}

// TestSystemsAreTellableApart: no two drivers share a system, a metrics
// label, or a queue prefix that begins another's, so a queue's name says
// which one system it is of.
func TestSystemsAreTellableApart(t *testing.T) {
	systems, labels := map[string]bool{}, map[string]bool{}
	var plain int
	drivers := registry.Drivers()
	for i, d := range drivers {
		tr, w := d.Traits(), d.Words()
		if systems[string(tr.System)] || labels[w.ServerLabel] {
			t.Errorf("%s: system or label %q given twice", tr.System, w.ServerLabel)
		}
		systems[string(tr.System)], labels[w.ServerLabel] = true, true
		if tr.QueuePrefix == "" {
			plain++
		}
		for _, o := range drivers[i+1:] {
			a, b := tr.QueuePrefix, o.Traits().QueuePrefix
			if a != "" && b != "" && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a)) {
				t.Errorf("%s's prefix %q and %s's %q: one begins the other", tr.System, a, o.Traits().System, b)
			}
		}
		if got, ok := registry.Of(tr.System); !ok || got.Traits().System != tr.System {
			t.Errorf("Of(%s) does not find its driver", tr.System)
		}
	}
	if plain != 1 {
		t.Errorf("%d systems name their queues plainly: exactly one may, the one a name without a prefix is of", plain)
	}
	// A name of no other system's form is the default system's: the
	// commands take its driver to be there.
	if d, ok := registry.Of(deadletter.DefaultSystem); !ok || d.Traits().QueuePrefix != "" {
		t.Errorf("the default system %s has no driver, or one whose queues are not named plainly", deadletter.DefaultSystem)
	}
	if len(registry.JobStores()) == 0 || len(registry.ConfigRules()) != len(drivers) {
		t.Errorf("%d job stores, %d configuration rules for %d drivers", len(registry.JobStores()), len(registry.ConfigRules()), len(drivers))
	}
}
