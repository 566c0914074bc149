package access

import (
	"context"
	"slices"

	"github.com/expiryctl/expiryctl/store"
)

// Self is the login a session is connected as and what it may do: the
// identity four-eyes compares, which --actor does not change.
type Self struct {
	// Login is the session's login (session_user).
	Login string `json:"login"`
	// Roles are the roles of the deployment's groups the login is a
	// member of (operator, approver, …), in store.Roles' order.
	Roles []string `json:"roles"`
	// Bypasses names each way around the rules the login holds
	// (store.Standing.Kinds): for such a login governance is advisory.
	Bypasses []string `json:"bypasses"`
}

// SelfOf reads the session's own login, its groups in the database's
// deployment and its ways around the rules, unaudited: an interface shows
// it beside what it does, as `access list` shows everyone's.
func SelfOf(ctx context.Context, q store.Querier) (Self, error) {
	d, err := store.ReadDeployment(ctx, q)
	if err != nil {
		return Self{}, err
	}
	st, err := store.LoginStanding(ctx, q)
	if err != nil {
		return Self{}, err
	}
	// pg_has_role errors on a role that does not exist, and a deployment
	// need not have all five groups yet: only the existing are asked.
	var groups []string
	err = q.QueryRow(ctx, `SELECT coalesce(array_agg(g.rolname::text), '{}') FROM pg_roles g
		WHERE g.rolname = ANY ($1) AND pg_has_role(session_user, g.oid, 'MEMBER')`, d.Groups()).Scan(&groups)
	if err != nil {
		return Self{}, err
	}
	s := Self{Login: st.Login, Roles: []string{}, Bypasses: st.Kinds()}
	for _, r := range store.Roles {
		if slices.Contains(groups, d.MustGroup(r)) {
			s.Roles = append(s.Roles, r)
		}
	}
	if s.Bypasses == nil {
		s.Bypasses = []string{}
	}
	return s, nil
}
