package store

import (
	"context"
	"strings"
)

// Standing is what a login is to the schema: whether it holds a way around
// the rules (a superuser, the schema's owner, CREATEROLE, membership of
// pg_write_all_data or pg_read_all_data, BYPASSRLS, ADMIN OPTION on one of
// expiryctl's groups), or none (then every rule binds it).
type Standing struct {
	Login string
	// Superuser and Owner (a member of the schema's owner) may change
	// anything, triggers included.
	Superuser, Owner bool
	// CreateRole may grant itself the owner's role or any group.
	CreateRole bool
	// WriteAllData writes every table directly; ReadAllData reads every
	// payload; BypassRLS passes row security.
	WriteAllData, ReadAllData, BypassRLS bool
	// GroupAdmin holds ADMIN OPTION on one of expiryctl's groups without
	// being the owner: it may grant that group to anyone.
	GroupAdmin bool
}

// Governed reports whether the schema's rules bind the login: it holds
// none of the ways around them.
func (s Standing) Governed() bool { return len(s.Bypasses()) == 0 }

// Bypasses names each way around the rules the login holds, for a message.
func (s Standing) Bypasses() []string {
	var parts []string
	for _, b := range []struct {
		held bool
		what string
	}{
		{s.Superuser, "a superuser"},
		{s.Owner && !s.Superuser, "the owner of the " + Schema + " schema"},
		{s.CreateRole && !s.Superuser, "a CREATEROLE login (it can grant itself the owner's role or any group)"},
		{s.WriteAllData && !s.Superuser, "a member of pg_write_all_data (it writes the tables directly)"},
		{s.ReadAllData && !s.Superuser, "a member of pg_read_all_data (it reads every payload)"},
		{s.BypassRLS && !s.Superuser, "a BYPASSRLS login"},
		{s.GroupAdmin && !s.Superuser && !s.Owner, "an administrator of expiryctl's groups (ADMIN OPTION: it can grant them)"},
	} {
		if b.held {
			parts = append(parts, b.what)
		}
	}
	return parts
}

// Kinds names each way around the rules the login holds in a word, for a
// listing: superuser, owner, createrole, pg_write_all_data,
// pg_read_all_data, bypassrls, group_admin.
func (s Standing) Kinds() []string {
	var kinds []string
	for _, k := range []struct {
		held bool
		name string
	}{
		{s.Superuser, "superuser"}, {s.Owner && !s.Superuser, "owner"}, {s.CreateRole && !s.Superuser, "createrole"},
		{s.WriteAllData && !s.Superuser, "pg_write_all_data"}, {s.ReadAllData && !s.Superuser, "pg_read_all_data"},
		{s.BypassRLS && !s.Superuser, "bypassrls"}, {s.GroupAdmin && !s.Superuser && !s.Owner, "group_admin"},
	} {
		if k.held {
			kinds = append(kinds, k.name)
		}
	}
	return kinds
}

// What names the standing for a message.
func (s Standing) What() string {
	parts := s.Bypasses()
	if len(parts) == 0 {
		return "a governed login"
	}
	return strings.Join(parts, " and ")
}

// standingColumns read a Standing of the role r (a pg_roles row) against
// the schema $1 and its deployment's groups (those that may use it), in
// Standing's field order after Login.
const standingColumns = `r.rolsuper,
	coalesce((SELECT pg_has_role(r.oid, n.nspowner, 'MEMBER') AND NOT r.rolsuper FROM pg_namespace n WHERE n.nspname = $1), false),
	r.rolcreaterole,
	pg_has_role(r.oid, 'pg_write_all_data', 'MEMBER'), pg_has_role(r.oid, 'pg_read_all_data', 'MEMBER'),
	r.rolbypassrls,
	EXISTS (SELECT 1 FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid
	         WHERE a.member = r.oid AND a.admin_option AND g.rolname = ANY (` + deploymentGroupsOfSchema + `::text[]))`

// LoginStanding reads the standing of the login q is connected as.
func LoginStanding(ctx context.Context, q Querier) (Standing, error) {
	var s Standing
	err := q.QueryRow(ctx, `SELECT r.rolname, `+standingColumns+` FROM pg_roles r WHERE r.rolname = session_user`,
		Schema).Scan(&s.Login, &s.Superuser, &s.Owner, &s.CreateRole, &s.WriteAllData, &s.ReadAllData, &s.BypassRLS, &s.GroupAdmin)
	return s, err
}

// StandingsOf reads the standing of every role that can log in and holds a
// way around the rules, by name: the logins `access list` names beside the
// groups' members. A cluster has few roles, so all are read.
func StandingsOf(ctx context.Context, q Querier) ([]Standing, error) {
	rows, err := q.Query(ctx, `SELECT r.rolname, `+standingColumns+` FROM pg_roles r WHERE r.rolcanlogin ORDER BY r.rolname`, Schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Standing
	for rows.Next() {
		var s Standing
		if err := rows.Scan(&s.Login, &s.Superuser, &s.Owner, &s.CreateRole, &s.WriteAllData, &s.ReadAllData, &s.BypassRLS, &s.GroupAdmin); err != nil {
			return nil, err
		}
		if !s.Governed() {
			out = append(out, s)
		}
	}
	return out, rows.Err()
}

// RelationStanding is what the login of q's session is to a relation of
// another system's database (River's river_job, a team's jobs table): the
// ways it holds around that system's own rules, in a word each —
// superuser, "owner of RELATION" (a member of its owner), and
// pg_write_all_data. None: the login holds only what was granted to it,
// which is what docs/river.md and docs/jobtable.md ask of a replay's
// login. A relation that does not exist is left out of the question.
func RelationStanding(ctx context.Context, q Querier, relation string) (login string, kinds []string, err error) {
	var super, owner, writeAll bool
	err = q.QueryRow(ctx, `SELECT current_user::text, r.rolsuper,
			coalesce((SELECT pg_has_role(current_user, c.relowner, 'MEMBER') FROM pg_class c WHERE c.oid = to_regclass($1)), false),
			pg_has_role(current_user, 'pg_write_all_data', 'MEMBER')
		FROM pg_roles r WHERE r.rolname = current_user`, relation).Scan(&login, &super, &owner, &writeAll)
	if err != nil {
		return "", nil, err
	}
	if super {
		kinds = append(kinds, "superuser")
	}
	if owner && !super {
		kinds = append(kinds, "owner of "+relation)
	}
	if writeAll && !super {
		kinds = append(kinds, "pg_write_all_data")
	}
	return login, kinds, nil
}
