package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DatabaseAccess says whether the database is closed to logins outside
// expiryctl's groups, and what is left to close it.
type DatabaseAccess struct {
	// Closed is true when PUBLIC may neither connect nor create
	// temporary tables, and each group may connect.
	Closed bool `json:"closed"`
	// Pending are the statements that would close it, which the login
	// that migrated could not run (only the database's owner or a
	// superuser may): a DBA runs them.
	Pending []string `json:"pending,omitempty"`
}

// CloseDatabase revokes CONNECT and TEMPORARY on the current database from
// PUBLIC and grants CONNECT to d's groups (and TEMPORARY to the auditor,
// for reconcile reads the policy's defaults from a temporary table), so
// that a login in no group cannot connect, hold a lock, or read the
// catalog's view of the schema. For a named deployment it also takes them
// from the unnamed deployment's groups, which the database granted before
// it was moved to its name (MoveDeployment) and which other deployments of
// the cluster may share. A login that may not change the database's
// privileges gets the statements back, unrun.
func CloseDatabase(ctx context.Context, q Querier, d Deployment) (DatabaseAccess, error) {
	var name, owner string
	var publicConnect, publicTemp, canGrant bool
	err := q.QueryRow(ctx, `SELECT d.datname, (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'expiryctl'),
		       has_database_privilege('public', d.oid, 'CONNECT'), has_database_privilege('public', d.oid, 'TEMPORARY'),
		       pg_has_role(current_user, d.datdba, 'USAGE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
		FROM pg_database d WHERE d.datname = current_database()`).Scan(&name, &owner, &publicConnect, &publicTemp, &canGrant)
	if err != nil {
		return DatabaseAccess{}, fmt.Errorf("read the database's privileges: %w", err)
	}
	// The schema's owner migrates and grants: it connects too.
	grantees := append([]string{owner}, d.Groups()...)
	var missing []string
	for _, g := range grantees {
		var ok bool
		if err := q.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'CONNECT')`, g).Scan(&ok); err != nil {
			return DatabaseAccess{}, fmt.Errorf("read the database's privileges: %w", err)
		}
		if !ok || publicConnect {
			missing = append(missing, g)
		}
	}
	var unnamed []string
	if d.Named() {
		if err := q.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT r.rolname::text), '{}')
			FROM pg_database d, aclexplode(d.datacl) a JOIN pg_roles r ON r.oid = a.grantee
			WHERE d.datname = current_database() AND r.rolname = ANY ($1)`, Groups).Scan(&unnamed); err != nil {
			return DatabaseAccess{}, fmt.Errorf("read the database's privileges: %w", err)
		}
	}
	if !publicConnect && !publicTemp && len(missing) == 0 && len(unnamed) == 0 {
		return DatabaseAccess{Closed: true}, nil
	}
	db := pgx.Identifier{name}.Sanitize()
	statements := []string{
		"REVOKE CONNECT, TEMPORARY ON DATABASE " + db + " FROM PUBLIC",
		"GRANT CONNECT ON DATABASE " + db + " TO " + strings.Join(grantees, ", "),
		"GRANT TEMPORARY ON DATABASE " + db + " TO " + pgx.Identifier{d.MustGroup("auditor")}.Sanitize(),
	}
	if len(unnamed) > 0 {
		statements = append(statements, "REVOKE CONNECT, TEMPORARY ON DATABASE "+db+" FROM "+strings.Join(unnamed, ", "))
	}
	if !canGrant {
		return DatabaseAccess{Pending: statements}, nil
	}
	for _, s := range statements {
		if _, err := q.Exec(ctx, s); err != nil {
			return DatabaseAccess{Pending: statements}, fmt.Errorf("close the database to logins outside expiryctl's groups: %w", err)
		}
	}
	return DatabaseAccess{Closed: true}, nil
}
