package tui

import (
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/tui/backend"
)

// The interfaces and types of the services the TUI calls; see packages
// service and backend for their contracts.
type (
	// Services are everything the TUI calls.
	Services = backend.Services
	// Archive is the dead-letter archive (*deadletter.Archive).
	Archive = service.Archive
	// OldestLister is an archive that can list oldest first.
	OldestLister = service.OldestLister
	// Requests is the replay request service (*replay.Service).
	Requests = service.Requests
	// Runner runs an approved request, reporting progress.
	Runner = backend.Runner
	// RunProgress is a snapshot of a run.
	RunProgress = backend.RunProgress
	// RunSummary is how a run ended.
	RunSummary = backend.RunSummary
	// CanaryState is where a run's canary stands.
	CanaryState = backend.CanaryState
	// AuditTrail lists and verifies the audit trail.
	AuditTrail = backend.AuditTrail
	// AuditFilter narrows the audit listing.
	AuditFilter = backend.AuditFilter
	// AuditEntry is one audit row.
	AuditEntry = backend.AuditEntry
	// AuditPage is one page of the trail.
	AuditPage = backend.AuditPage
	// AuditCheck is the result of a chain verification.
	AuditCheck = backend.AuditCheck
	// Identity is the login the TUI is connected as.
	Identity = backend.Identity
)

// The canary states, re-exported for runner adapters.
const (
	CanaryNone    = backend.CanaryNone
	CanaryPending = backend.CanaryPending
	CanarySending = backend.CanarySending
	CanaryWaiting = backend.CanaryWaiting
	CanaryPassed  = backend.CanaryPassed
	CanaryFailed  = backend.CanaryFailed
	CanaryStopped = backend.CanaryStopped
)
