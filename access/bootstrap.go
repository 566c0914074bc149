package access

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/store"
)

// BootstrapResult is what Bootstrap did, or would do.
type BootstrapResult struct {
	// Owner is the login that will own the schema and manage membership.
	Owner string `json:"owner"`
	// Deployment is the deployment set up; "" is the unnamed one.
	Deployment store.Deployment `json:"deployment"`
	// Statements are the SQL statements of the bootstrap, in order: the
	// groups' creation, the owner's ADMIN OPTION on each, and CREATE ROLE
	// for each login asked for. Print returns them unrun.
	Statements []string `json:"statements"`
	// Created are the groups this bootstrap created; Administered those
	// the owner was given ADMIN OPTION on.
	Created      []string `json:"created"`
	Administered []string `json:"administered"`
	// OwnerCreateRole is true when the owner still holds CREATEROLE,
	// which would make every rule advisory for it.
	OwnerCreateRole bool `json:"owner_createrole"`
}

// Bootstrap sets deployment d up for owner, run by a DBA (a superuser or a
// CREATEROLE login) once, before the owner's first `expiryctl migrate`: it
// creates d's groups that do not exist (a named deployment's carry its
// name, so that they grant nothing in another deployment's database),
// gives owner ADMIN OPTION on each, so that owner needs no CREATEROLE to
// migrate and to grant the groups, and creates the logins asked for. It may run again: what exists is kept. A
// role of a group's name that can log in is refused, as migrate refuses it.
// Nothing is audited: the schema, and its trail, may not exist yet;
// `access list` shows the result.
func Bootstrap(ctx context.Context, q store.Querier, owner string, d store.Deployment, logins []string) (BootstrapResult, error) {
	res := BootstrapResult{Owner: owner, Deployment: d, Statements: BootstrapStatements(owner, d, logins)}
	if d.Named() {
		if err := store.CheckDeploymentName(string(d)); err != nil {
			return res, err
		}
	}
	o, found, err := roleOf(ctx, q, owner)
	if err != nil {
		return res, err
	}
	if !found {
		return res, fmt.Errorf("there is no role %q to own the schema: create its login first (CREATE ROLE %s LOGIN)", owner, pgx.Identifier{owner}.Sanitize())
	}
	res.OwnerCreateRole = o.createRole
	if !o.canLogin {
		return res, fmt.Errorf("%s cannot log in: the schema's owner is the login that runs expiryctl migrate", owner)
	}
	groups := GroupsOf(d)
	for i, g := range groups {
		r, found, err := roleOf(ctx, q, g.Name)
		switch {
		case err != nil:
			return res, err
		case !found:
			if _, err := q.Exec(ctx, res.Statements[i]); err != nil && !isDuplicate(err) {
				return res, fmt.Errorf("create group %s: %w", g.Name, err)
			}
			res.Created = append(res.Created, g.Name)
		case r.canLogin || r.super:
			return res, fmt.Errorf("role %s exists and is a login or superuser role: expiryctl's groups must be NOLOGIN; rename or drop it", g.Name)
		}
	}
	for i, g := range groups {
		if _, err := q.Exec(ctx, res.Statements[len(groups)+i]); err != nil {
			return res, fmt.Errorf("give %s ADMIN OPTION on %s: %w (run this as a superuser or a CREATEROLE login)", owner, g.Name, err)
		}
		res.Administered = append(res.Administered, g.Name)
	}
	for i, l := range logins {
		if _, exists, err := roleOf(ctx, q, l); err != nil {
			return res, err
		} else if exists {
			continue
		}
		if _, err := q.Exec(ctx, res.Statements[2*len(groups)+i]); err != nil && !isDuplicate(err) {
			return res, fmt.Errorf("create login %s: %w", l, err)
		}
	}
	return res, nil
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505")
}
