package access

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/store"
)

// This file is the package's only SQL: membership lives in PostgreSQL's own
// catalogs (pg_auth_members), changed only by the schema's access_change.

// changeMembership grants (or revokes) login's membership of groups through
// access_change, which audits the change and refuses anyone but the
// schema's owner.
func changeMembership(ctx context.Context, q store.Querier, actor, login string, groups []string, grant bool) error {
	_, err := q.Exec(ctx, `SELECT expiryctl.access_change($1, $2, $3, $4)`, actor, login, groups, grant)
	return store.AsRefusal(err)
}

// Members returns every role that is a member of one of the deployment's
// groups (another deployment's people on the cluster are not listed), and
// every login in none that holds a way around the rules, by name, each
// with those ways (Bypasses), unaudited: for List and for checks that read
// it in their own snapshot.
func Members(ctx context.Context, q store.Querier) ([]Member, error) {
	d, err := store.ReadDeployment(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT m.rolname, array_agg(g.rolname ORDER BY g.rolname), m.rolsuper, m.rolcanlogin
		FROM pg_auth_members a
		JOIN pg_roles g ON g.oid = a.roleid
		JOIN pg_roles m ON m.oid = a.member
		WHERE g.rolname = ANY ($1)
		GROUP BY m.rolname, m.rolsuper, m.rolcanlogin ORDER BY m.rolname`,
		d.Groups())
	if err != nil {
		return nil, err
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Member, error) {
		var m Member
		err := row.Scan(&m.Login, &m.Groups, &m.Superuser, &m.CanLogin)
		return m, err
	})
	if err != nil {
		return nil, err
	}
	standings, err := store.StandingsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	for _, st := range standings {
		i := slices.IndexFunc(members, func(m Member) bool { return m.Login == st.Login })
		if i < 0 {
			members = append(members, Member{Login: st.Login, Groups: []string{}, Superuser: st.Superuser, CanLogin: true})
			i = len(members) - 1
		}
		members[i].Bypasses = st.Kinds()
	}
	for i := range members {
		if members[i].Bypasses == nil {
			members[i].Bypasses = []string{}
		}
	}
	slices.SortFunc(members, func(a, b Member) int { return strings.Compare(a.Login, b.Login) })
	return members, nil
}

// SchemaOwner returns the role that owns the expiryctl schema, for whom
// governance is advisory.
func SchemaOwner(ctx context.Context, q store.Querier) (string, error) {
	var owner string
	err := q.QueryRow(ctx, `SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'expiryctl'`).Scan(&owner)
	return owner, err
}

// role is what Bootstrap reads of a role.
type role struct {
	canLogin, super, createRole bool
}

// roleOf reads the role named name; found is false when there is none.
func roleOf(ctx context.Context, q store.Querier, name string) (r role, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT rolcanlogin, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = $1`, name).Scan(&r.canLogin, &r.super, &r.createRole)
	if errors.Is(err, pgx.ErrNoRows) {
		return role{}, false, nil
	}
	return r, err == nil, err
}

// BootstrapStatements are the statements that set deployment d up: its
// five NOLOGIN groups, the owner's ADMIN OPTION on them, and a login for
// each of logins (the DBA sets their passwords, or uses another
// authentication).
func BootstrapStatements(owner string, d store.Deployment, logins []string) []string {
	var out []string
	for _, g := range GroupsOf(d) {
		out = append(out, "CREATE ROLE "+pgx.Identifier{g.Name}.Sanitize()+" NOLOGIN NOINHERIT")
	}
	for _, g := range GroupsOf(d) {
		out = append(out, "GRANT "+pgx.Identifier{g.Name}.Sanitize()+" TO "+pgx.Identifier{owner}.Sanitize()+" WITH ADMIN OPTION")
	}
	for _, l := range logins {
		out = append(out, "CREATE ROLE "+pgx.Identifier{l}.Sanitize()+" LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB")
	}
	return out
}
