package audit

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/expiryctl/expiryctl/store"
)

// The schema's audit_append (store/functions/audit_append.sql) takes an
// allowlist; these lists are the same, for code that must say in advance
// what it will refuse (the fakes of internal/fixture/fakes), and a test
// holds them to the function's text.
var (
	// ClientActions are the actions a client records with any outcome:
	// reads, and reports that change nothing.
	ClientActions = []string{"dlq.summary", "dlq.list", "dlq.show", "dlq.ingest", "dlq.purge", "replay.show",
		"replay.list", "replay.plan", "replay.dry_run", "replay.run.failover", "policy.show", "access.list",
		"audit.list", "audit.verify", "audit.export", "audit.reconcile", "metrics.serve", "tui.open", "demo.run",
		"schema.migrate", "schema.migrate.down"}
	// ReservedActions are the state changes whose "ok" row only the
	// function that makes the change writes: a client records only their
	// refusals and failures.
	ReservedActions = []string{"replay.request", "replay.approve", "replay.reject", "replay.cancel", "replay.expire",
		"replay.run.start", "replay.run.interrupted", "replay.run.cancelled", "replay.halt", "replay.canary.start",
		"replay.canary.pass", "replay.complete", "policy.set", "policy.propose", "policy.approve", "policy.reject",
		"access.grant", "access.revoke", "dlq.ingest.batch", "dlq.purge.batch", "audit.checkpoint",
		"migrate.governance"}
	// RefusalActions are actions a client records only as refused or
	// failed, and that are no state change: a run refused before it
	// started.
	RefusalActions = []string{"replay.run"}
)

var whitespace = regexp.MustCompile(`\s`)

// CheckClientEntry is audit_append's rule in Go: nil when a client may
// record action with outcome, else the *store.Refusal the database raises.
func CheckClientEntry(action string, outcome Outcome) error {
	known := slices.Contains([]Outcome{OK, Refused, Failed}, outcome)
	switch {
	case known && slices.Contains(ClientActions, action):
		return nil
	case outcome != OK && known && (slices.Contains(ReservedActions, action) || slices.Contains(RefusalActions, action)):
		return nil
	case slices.Contains(ReservedActions, strings.ToLower(whitespace.ReplaceAllString(action, ""))):
		return &store.Refusal{Rule: "audit-reserved", Message: fmt.Sprintf("an '%s' '%s' row is written only by the database function that makes the change, in the same transaction; "+
			"a client records only its refusals and failures, as outcome 'refused' or 'error'", outcome, action)}
	case !known:
		return &store.Refusal{Rule: "audit-outcome", Message: fmt.Sprintf("outcome '%s' is not one of ok, refused, error", outcome)}
	}
	return &store.Refusal{Rule: "audit-action", Message: fmt.Sprintf(
		"action '%s' is not one a client records: the trail takes the actions of docs/audit.md, spelt exactly", action)}
}
