package tuitest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
)

// The fakes of the services the commands share live in
// internal/fixture/fakes; these are the fakes of the TUI's own screen
// ports (backend.Runner and backend.AuditTrail) and the services a screen
// test starts from.

// Runner is a fake runner that reports Steps, then ends with Summary and
// Err.
type Runner struct {
	Steps   []backend.RunProgress
	Summary backend.RunSummary
	Err     error
	// Hold, when set, is waited on before the run ends; a run stopped
	// meanwhile (ctx cancelled) ends as the real runner's stop path does,
	// with Stopped as its summary and an *replay.InterruptedError.
	Hold    chan struct{}
	Stopped backend.RunSummary
}

// Run reports the steps and returns the summary.
func (r *Runner) Run(ctx context.Context, id int64, progress func(backend.RunProgress)) (backend.RunSummary, error) {
	for _, p := range r.Steps {
		progress(p)
	}
	if r.Hold != nil {
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return r.Stopped, &replay.InterruptedError{RequestID: id, Err: ctx.Err()}
		}
	}
	return r.Summary, r.Err
}

// Audit is a fake audit trail of entries n … 1.
type Audit struct {
	mu      sync.Mutex
	entries []backend.AuditEntry
	Check   backend.AuditCheck
}

// NewAudit returns a trail of n rows by alternating actors.
func NewAudit(n int) *Audit {
	a := &Audit{Check: backend.AuditCheck{OK: true, Rows: int64(n), Head: int64(n)}}
	actions := []string{"dlq.summary", "dlq.list", "dlq.show", "replay.request", "replay.approve"}
	actors := []string{"alice", "bob"}
	for i := n; i >= 1; i-- {
		a.entries = append(a.entries, backend.AuditEntry{Seq: int64(i), At: fakes.Epoch.Add(-time.Duration(n-i) * time.Second),
			Actor: actors[i%2], DBRole: "root", Action: actions[i%len(actions)], Target: fmt.Sprintf("dead_letter:%d", i%7),
			Outcome: "ok", Details: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return a
}

// List pages the matching entries newest first.
func (a *Audit) List(_ context.Context, f backend.AuditFilter, before int64, limit int) (backend.AuditPage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var p backend.AuditPage
	for _, e := range a.entries {
		if (before != 0 && e.Seq >= before) || (f.Actor != "" && e.Actor != f.Actor) || (f.Action != "" && e.Action != f.Action) || (f.Target != "" && e.Target != f.Target) {
			continue
		}
		if len(p.Entries) == limit {
			p.Next = p.Entries[limit-1].Seq
			break
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}

// Verify returns Check.
func (a *Audit) Verify(context.Context) (backend.AuditCheck, error) { return a.Check, nil }

// people are the fakes' people and their roles, as the demo grants them.
var people = map[string][]string{"alice": {"ingester", "operator"}, "bob": {"approver"}, "carol": {"approver"}, "audrey": {"auditor"}}

// Identity is person's login as the demo grants it: alice an operator,
// bob and carol approvers, audrey an auditor.
func Identity(person string) backend.Identity {
	return backend.Identity{Login: person, Roles: people[person]}
}

// Services returns services over the fakes, acting as requests' actor
// with that person's login.
func Services(archive service.Archive, requests *fakes.Requests) backend.Services {
	return backend.Services{
		Archive: archive, Requests: requests, Actor: requests.Actor, Now: fakes.Now,
		Identity: Identity(requests.Actor), Systems: registry.Systems(),
		Policy: func(context.Context) (replay.Policy, error) {
			return replay.Policy{Approvers: []string{"alice", "bob"}, MaxCohort: 500, MaxRate: 50}, nil
		},
	}
}
