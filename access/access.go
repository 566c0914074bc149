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
	"github.com/expiryctl/expiryctl/store"
)

// The unnamed deployment's groups (store.Deployment): a named deployment's
// carry its name, expiryctl_NAME_operator and so on.
const (
	Ingester = "expiryctl_ingester"
	Operator = "expiryctl_operator"
	Approver = "expiryctl_approver"
	Auditor  = "expiryctl_auditor"
	Admin    = "expiryctl_admin"
)

// mayByRole says what each role's group may do.
var mayByRole = map[string]string{
	"ingester": "capture dead letters (dlq ingest)",
	"operator": "read the archive, request replays and discards, run approved requests, cancel, purge",
	"approver": "approve and reject requests (never their own login's)",
	"auditor":  "read, export and verify the audit trail; read replay requests, not payloads",
	"admin":    "propose and approve policy changes (never their own login's)",
}

// Groups lists the unnamed deployment's groups with what each may do, in
// the order docs show them.
func Groups() []Group { return GroupsOf("") }

// GroupsOf lists deployment d's groups with what each may do.
func GroupsOf(d store.Deployment) []Group {
	out := make([]Group, len(store.Roles))
	for i, r := range store.Roles {
		out[i] = Group{Name: d.MustGroup(r), May: mayByRole[r]}
	}
	return out
}

// Group is one of expiryctl's groups.
type Group struct {
	Name string `json:"name"`
	May  string `json:"may"`
}

// CheckGroups refuses a name that names no group of any deployment, saying
// which are: a group is named by its role (operator), by the unnamed
// deployment's name for it (expiryctl_operator), or by a named
// deployment's (expiryctl_NAME_operator). Which deployment's group it is
// the database says (GroupsIn).
func CheckGroups(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("name at least one group: %s", groupNames(""))
	}
	for _, n := range names {
		if _, _, ok := store.ParseGroup(n); !ok && !slices.Contains(store.Roles, n) {
			return fmt.Errorf("unknown group %q: the groups are %s, or their roles alone (%s)", n, groupNames(""), strings.Join(store.Roles, ", "))
		}
	}
	return nil
}

// GroupsIn turns names (as CheckGroups takes them) into deployment d's
// groups, refusing another deployment's.
func GroupsIn(d store.Deployment, names []string) ([]string, error) {
	if err := CheckGroups(names); err != nil {
		return nil, err
	}
	out := make([]string, len(names))
	for i, n := range names {
		g, ok := d.Group(n)
		if !ok {
			return nil, fmt.Errorf("%s is not a group of this database's deployment %s: its groups are %s", n, d, groupNames(d))
		}
		out[i] = g
	}
	return out, nil
}

func groupNames(d store.Deployment) string {
	return strings.Join(d.Groups(), ", ")
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
		d, err := store.ReadDeployment(ctx, tx)
		if err != nil {
			return err
		}
		named, err := GroupsIn(d, groups)
		if err != nil {
			return &store.Refusal{Rule: "groups", Message: err.Error()}
		}
		return changeMembership(ctx, tx, s.Actor, login, named, grant)
	})
	if err != nil {
		_ = audit.RecordFailure(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: action, Target: "login:" + login,
			Details: map[string]any{"login": login, "groups": groups}}, err)
	}
	return err
}

// List returns every role that is a member of one of the deployment's
// groups, and every login that holds a way around the rules, by name.
// Audited.
func (s *Service) List(ctx context.Context) ([]Member, error) {
	members, err := Members(ctx, s.Pool)
	if err != nil {
		return nil, err
	}
	return members, audit.Record(ctx, s.Pool, audit.Entry{Actor: s.Actor, Action: "access.list",
		Details: map[string]any{"members": len(members)}})
}
