package store

import (
	"context"
	"strings"
)

// Standing is what a login is to the schema: a superuser, its owner, or
// neither (then every rule binds it).
type Standing struct {
	Login     string
	Superuser bool
	Owner     bool
}

// Governed reports whether the schema's rules bind the login: it is neither
// a superuser nor (a member of) the schema's owner.
func (s Standing) Governed() bool { return !s.Superuser && !s.Owner }

// What names the standing for a message.
func (s Standing) What() string {
	var parts []string
	if s.Superuser {
		parts = append(parts, "a superuser")
	}
	if s.Owner {
		parts = append(parts, "the owner of the "+Schema+" schema")
	}
	if len(parts) == 0 {
		return "a governed login"
	}
	return strings.Join(parts, " and ")
}

// LoginStanding reads the standing of the login q is connected as.
func LoginStanding(ctx context.Context, q Querier) (Standing, error) {
	var s Standing
	err := q.QueryRow(ctx, `SELECT session_user, r.rolsuper,
			coalesce((SELECT pg_has_role(session_user, n.nspowner, 'MEMBER') AND NOT r.rolsuper
			          FROM pg_namespace n WHERE n.nspname = $1), false)
		FROM pg_roles r WHERE r.rolname = session_user`, Schema).Scan(&s.Login, &s.Superuser, &s.Owner)
	return s, err
}
