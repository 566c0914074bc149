// Package access manages who may do what: per-person PostgreSQL logins as
// members of expiryctl's five NOLOGIN groups. Only the schema's owner
// changes membership, through the schema's access_change function, which
// audits every change; anyone may list it.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
)

// The groups `expiryctl migrate` creates.
const (
	Ingester = "expiryctl_ingester"
	Operator = "expiryctl_operator"
	Approver = "expiryctl_approver"
	Auditor  = "expiryctl_auditor"
	Admin    = "expiryctl_admin"
)

// Groups lists the groups with what each may do, in the order docs show
// them.
func Groups() []Group {
	return []Group{
		{Ingester, "capture dead letters (dlq ingest)"},
		{Operator, "read the archive, request replays and discards, run approved requests, cancel, purge"},
		{Approver, "approve and reject requests (never their own login's)"},
		{Auditor, "read, export and verify the audit trail; read replay requests, not payloads"},
		{Admin, "propose and approve policy changes (never their own login's)"},
	}
}

// Group is one of expiryctl's groups.
type Group struct {
	Name string `json:"name"`
	May  string `json:"may"`
}

// CheckGroups refuses a name that is not one of the groups, saying which are.
func CheckGroups(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("name at least one group: %s", groupNames())
	}
	for _, n := range names {
		if !slices.ContainsFunc(Groups(), func(g Group) bool { return g.Name == n }) {
			return fmt.Errorf("unknown group %q: the groups are %s (full names)", n, groupNames())
		}
	}
	return nil
}

func groupNames() string {
	names := make([]string, 0, 5)
	for _, g := range Groups() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

// Member is a login and the expiryctl groups it belongs to, or a login
// in none that holds a way around the rules.
type Member struct {
	Login     string   `json:"login"`
	Groups    []string `json:"groups"`
	Superuser bool     `json:"superuser"`
	CanLogin  bool     `json:"can_login"`
	// Bypasses names each way around the rules the login holds
	// (store.Standing.Kinds): for these logins governance is advisory.
	Bypasses []string `json:"bypasses"`
}

// Service changes and lists membership, audited as Actor.
type Service struct {
	Pool  *pgxpool.Pool
	Actor string
}

// Grant makes login a member of groups. Only the schema owner may.
func (s *Service) Grant(ctx context.Context, login string, groups []string) error {
	return s.change(ctx, login, groups, true)
}

// Revoke ends login's membership of groups. Only the schema owner may.
func (s *Service) Revoke(ctx context.Context, login string, groups []string) error {
	return s.change(ctx, login, groups, false)
}

func (s *Service) change(ctx context.Context, login string, groups []string, grant bool) error {
	action := "access.grant"
	if !grant {
		action = "access.revoke"
	}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		return changeMembership(ctx, tx, s.Actor, login, groups, grant)
	})
	if err != nil {
		_ = audit.RecordFailure(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: action, Target: "login:" + login,
			Details: map[string]any{"login": login, "groups": groups}}, err)
	}
	return err
}

// List returns every role that is a member of an expiryctl group, and
// every login that holds a way around the rules, by name. Audited.
func (s *Service) List(ctx context.Context) ([]Member, error) {
	members, err := Members(ctx, s.Pool)
	if err != nil {
		return nil, err
	}
	return members, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "access.list",
		Details: map[string]any{"members": len(members)}})
}
