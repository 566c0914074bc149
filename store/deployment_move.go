package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DeploymentMove says what moving a schema from the unnamed deployment's
// groups to a named deployment's did.
type DeploymentMove struct {
	To Deployment `json:"to"`
	// Privileges is how many of the unnamed groups' privileges on the
	// schema's objects were given to the deployment's groups and taken
	// from the unnamed ones.
	Privileges int `json:"privileges"`
	// Members are the logins given the deployment's groups because this
	// trail granted them the unnamed ones (audited as access.grant).
	Members []GroupMembers `json:"members"`
	// NotMoved are members of the unnamed groups that this trail never
	// granted: another deployment's people on the same cluster, or logins
	// granted by hand. The owner grants them with `expiryctl access grant`
	// if they belong here.
	NotMoved []GroupMembers `json:"not_moved"`
	// Elsewhere are statements that would give the deployment's groups
	// what the unnamed ones hold outside the schema (the application's
	// tables the policy's eligibility and outcome queries read), for the
	// objects' owners to run.
	Elsewhere []string `json:"elsewhere"`
}

// GroupMembers is a login and groups of it.
type GroupMembers struct {
	Login  string   `json:"login"`
	Groups []string `json:"groups"`
}

// MoveDeployment moves the schema from the unnamed deployment's groups to
// d's, when the unnamed groups still hold privileges on it; it returns nil
// when there is nothing to move. In one transaction: every privilege an
// unnamed group holds on the schema, its tables, columns, sequences and
// functions is granted to d's group of the same role and revoked from the
// unnamed one, so that the unnamed groups, which other databases of the
// cluster may share, grant nothing here; and each login the trail granted
// an unnamed group (access_granted) and still a member of it is granted
// d's group through access_change, which audits it. Migrate runs it after
// applying the definition files rendered for d.
func MoveDeployment(ctx context.Context, pool *pgxpool.Pool, d Deployment) (*DeploymentMove, error) {
	if !d.Named() {
		return nil, nil
	}
	var move *DeploymentMove
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Serialised with ApplyDefinitions and another migrate's move.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+definitionsTable+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("migrate: lock %s: %w", definitionsTable, err)
		}
		// Names read from the catalog come back schema-qualified.
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog, pg_temp`); err != nil {
			return err
		}
		grants, err := unnamedGrants(ctx, tx)
		if err != nil {
			return err
		}
		// Only what the unnamed groups hold in the schema makes a move:
		// a grant of theirs elsewhere (an application's table) stays
		// theirs after it, and must not move the members at every migrate.
		if !slices.ContainsFunc(grants, func(g grantHeld) bool { return g.inSchema }) {
			return nil
		}
		move = &DeploymentMove{To: d, Members: []GroupMembers{}, NotMoved: []GroupMembers{}, Elsewhere: []string{}}
		for _, g := range grants {
			to := d.MustGroup(g.grantee)
			grant, revoke := g.statements(pgx.Identifier{to}.Sanitize(), pgx.Identifier{g.grantee}.Sanitize())
			if !g.inSchema {
				move.Elsewhere = append(move.Elsewhere, grant)
				continue
			}
			for _, s := range []string{grant, revoke} {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("migrate: move to the deployment %s's groups: %s: %w", d, s, err)
				}
			}
			move.Privileges++
		}
		return moveMembers(ctx, tx, d, move)
	})
	if err != nil {
		return nil, err
	}
	return move, nil
}

// grantHeld is one privilege an unnamed group holds.
type grantHeld struct {
	kind     string // TABLE, SEQUENCE, COLUMN, FUNCTION, SCHEMA
	object   string // schema-qualified, quoted
	column   string // quoted, for COLUMN
	priv     string
	grantee  string
	inSchema bool
}

func (g grantHeld) statements(to, from string) (grant, revoke string) {
	on, priv := g.kind+" "+g.object, g.priv
	if g.kind == "COLUMN" {
		on, priv = "TABLE "+g.object, g.priv+" ("+g.column+")"
	}
	return "GRANT " + priv + " ON " + on + " TO " + to, "REVOKE " + priv + " ON " + on + " FROM " + from
}

// unnamedGrants reads what the unnamed groups hold in this database: on
// the schema and its objects, and on tables of other schemas.
func unnamedGrants(ctx context.Context, tx pgx.Tx) ([]grantHeld, error) {
	rows, err := tx.Query(ctx, `
		SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, format('%I.%I', n.nspname, c.relname), '',
		       a.privilege_type, r.rolname, n.nspname = $2
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 CROSS JOIN LATERAL aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname = ANY ($1) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		UNION ALL
		SELECT 'COLUMN', format('%I.%I', n.nspname, c.relname), quote_ident(att.attname),
		       a.privilege_type, r.rolname, n.nspname = $2
		  FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 CROSS JOIN LATERAL aclexplode(att.attacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname = ANY ($1) AND att.attnum > 0 AND NOT att.attisdropped
		   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		UNION ALL
		SELECT 'FUNCTION', p.oid::regprocedure::text, '', a.privilege_type, r.rolname, n.nspname = $2
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 CROSS JOIN LATERAL aclexplode(p.proacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname = ANY ($1) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		UNION ALL
		SELECT 'SCHEMA', quote_ident(n.nspname), '', a.privilege_type, r.rolname, n.nspname = $2
		  FROM pg_namespace n CROSS JOIN LATERAL aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname = ANY ($1)
		 ORDER BY 6 DESC, 1, 2, 3, 4, 5`, Groups, Schema)
	if err != nil {
		return nil, fmt.Errorf("migrate: read the unnamed groups' privileges: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (grantHeld, error) {
		var g grantHeld
		err := row.Scan(&g.kind, &g.object, &g.column, &g.priv, &g.grantee, &g.inSchema)
		return g, err
	})
}

// moveMembers grants d's groups to the logins the trail granted the
// unnamed ones and that still hold them, and lists the other members.
func moveMembers(ctx context.Context, tx pgx.Tx, d Deployment, move *DeploymentMove) error {
	rows, err := tx.Query(ctx, `
		SELECT m.rolname, array_agg(g.rolname ORDER BY g.rolname),
		       coalesce(array_agg(g.rolname ORDER BY g.rolname) FILTER (WHERE EXISTS (
		           SELECT 1 FROM expiryctl.access_granted() t WHERE t.login = m.rolname AND t.group_name = g.rolname))::text[], '{}')
		  FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
		 WHERE g.rolname = ANY ($1) AND m.rolcanlogin
		   AND NOT pg_has_role(m.oid, (SELECT nspowner FROM pg_namespace WHERE nspname = $2), 'MEMBER')
		 GROUP BY m.rolname ORDER BY m.rolname`, Groups, Schema)
	if err != nil {
		return fmt.Errorf("migrate: read the unnamed groups' members: %w", err)
	}
	type held struct {
		login          string
		groups, traced []string
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (held, error) {
		var h held
		err := row.Scan(&h.login, &h.groups, &h.traced)
		return h, err
	})
	if err != nil {
		return err
	}
	for _, m := range members {
		if len(m.traced) > 0 {
			to := make([]string, len(m.traced))
			for i, g := range m.traced {
				to[i] = d.MustGroup(g)
			}
			if _, err := tx.Exec(ctx, `SELECT expiryctl.access_change('', $1, $2, true)`, m.login, to); err != nil {
				return fmt.Errorf("migrate: give %s the deployment's groups %v: %w", m.login, to, AsRefusal(err))
			}
			move.Members = append(move.Members, GroupMembers{Login: m.login, Groups: to})
		}
		if rest := slices.DeleteFunc(slices.Clone(m.groups), func(g string) bool { return slices.Contains(m.traced, g) }); len(rest) > 0 {
			move.NotMoved = append(move.NotMoved, GroupMembers{Login: m.login, Groups: rest})
		}
	}
	return nil
}
