package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// Two deployments on one cluster: the people and the owner of one attack
// the other with raw SQL. Before groups carried the deployment's name,
// another deployment's owner granting its own expiryctl_admin made an admin
// here.
func TestAnotherDeploymentsPeopleCanDoNothingHere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours := pgtest.NewDeployment(t, pgtest.DeploymentName("rta"))
	theirs := pgtest.NewDeployment(t, pgtest.DeploymentName("rtb"))

	alice := ours.GrantedLogin(t, "alice", access.Operator)
	bob := ours.GrantedLogin(t, "bob", access.Approver)
	mallory := theirs.GrantedLogin(t, "mallory", access.Ingester, access.Operator, access.Approver, access.Auditor, access.Admin)
	theirOwner := theirs.OwnerPool(t)

	for _, g := range ours.Deployment.Groups() {
		// Their owner administers its own groups, not ours.
		refused(t, theirOwner, "privilege", "GRANT "+g+" TO "+mallory.Name)
		// Their schema's access_change knows their groups only.
		refused(t, theirOwner, "groups", `SELECT expiryctl.access_change('', $1, $2, true)`, mallory.Name, []string{g})
	}
	var member bool
	if err := ours.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member
		JOIN pg_roles g ON g.oid = a.roleid WHERE m.rolname = $1 AND g.rolname = ANY ($2))`, mallory.Name, ours.Deployment.Groups()).Scan(&member); err != nil {
		t.Fatal(err)
	}
	if member {
		t.Fatalf("%s became a member of our groups", mallory.Name)
	}

	// Neither mallory nor their owner may connect to our database.
	for _, who := range []string{mallory.Name, theirs.Owner} {
		conn, err := pgx.Connect(ctx, pgtest.WithUser(ours.URL, who))
		if err == nil {
			conn.Close(ctx)
			t.Errorf("%s connected to our database", who)
		} else if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s connecting to our database: %v, want permission denied", who, err)
		}
	}

	// A DBA who opens our database to her anyway gives her nothing: our
	// schema's privileges and every function's check are our groups'.
	if _, err := ours.Pool.Exec(ctx, "GRANT CONNECT ON DATABASE "+ours.Name+" TO "+mallory.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ours.Pool.Exec(context.Background(), "REVOKE CONNECT ON DATABASE "+ours.Name+" FROM "+mallory.Name)
	})
	m := pgtest.Connect(t, pgtest.WithUser(ours.URL, mallory.Name))
	refused(t, m, "privilege", `SELECT count(*) FROM expiryctl.dead_letters`)
	refused(t, m, "privilege", `SELECT expiryctl.replay_review('', 1, 'approve', 'ok', false, NULL)`)
	refused(t, m, "privilege", `SELECT expiryctl.policy_set('', '{"approvers": []}', 'empty it')`)
	refused(t, m, "privilege", `SELECT expiryctl.audit_append('dlq.list', '', '{}', 'ok', '')`)

	// Our people act, checked against our groups: bob's review of a
	// request that does not exist passes the role check and finds none.
	var n int
	if err := alice.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters`).Scan(&n); err != nil {
		t.Fatalf("our operator cannot read our archive: %v", err)
	}
	_, err := bob.Pool.Exec(ctx, `SELECT expiryctl.replay_review('', 999, 'approve', 'ok', false, NULL)`)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != store.NotFoundSQLState {
		t.Errorf("our approver reviewing request 999: %v, want not found", err)
	}

	// Each deployment's list shows its own people.
	ourMembers, err := access.Members(ctx, ours.Pool)
	if err != nil {
		t.Fatal(err)
	}
	logins := func(ms []access.Member) []string {
		var out []string
		for _, m := range ms {
			if len(m.Groups) > 0 {
				out = append(out, m.Login)
			}
		}
		return out
	}
	if got := logins(ourMembers); !slices.Contains(got, alice.Name) || !slices.Contains(got, bob.Name) || slices.Contains(got, mallory.Name) {
		t.Errorf("our access list names %v, want alice and bob and not mallory", got)
	}
	for _, m := range ourMembers {
		if m.Login == theirs.Owner {
			t.Errorf("our access list names their owner: %+v", m)
		}
	}
	theirMembers, err := access.Members(ctx, theirs.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := logins(theirMembers); !slices.Contains(got, mallory.Name) || slices.Contains(got, alice.Name) {
		t.Errorf("their access list names %v, want mallory and not alice", got)
	}

	// No other database admits our groups; the unnamed ones open every
	// test's database (and the template they are cloned from).
	if shared, err := store.DatabasesSharing(ctx, ours.Pool, ours.Deployment); err != nil || len(shared) > 0 {
		t.Errorf("databases sharing our groups: %v (%v), want none", shared, err)
	}
	unnamed := pgtest.New(t)
	if shared, err := store.DatabasesSharing(ctx, unnamed.Pool, ""); err != nil || len(shared) == 0 {
		t.Errorf("databases sharing the unnamed groups with a test's: %v (%v), want the template at least", shared, err)
	}

	// Nothing of theirs holds anything in our schema.
	var leaks []string
	rows, err := ours.Pool.Query(ctx, `SELECT r.rolname FROM pg_roles r
		WHERE r.rolname = ANY ($1) AND (has_schema_privilege(r.oid, 'expiryctl', 'USAGE')
		   OR has_database_privilege(r.oid, current_database(), 'CONNECT'))`, append(theirs.Deployment.Groups(), theirs.Owner))
	if err != nil {
		t.Fatal(err)
	}
	if leaks, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(leaks) > 0 {
		t.Errorf("their roles %v hold privileges in our database", leaks)
	}
}

// A deployment's name is fixed once its schema is installed.
func TestADeploymentKeepsItsName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDeployment(t, pgtest.DeploymentName("rtn"))
	owner := db.OwnerPool(t)
	if _, err := store.MigrateDeployment(ctx, owner, pgtest.DeploymentName("rto")); err == nil {
		t.Fatal("migrating a named deployment's schema under another name succeeded")
	}
	res, err := store.Migrate(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deployment != db.Deployment || len(res.Applied) > 0 || len(res.Definitions.Replaced) > 0 || res.Moved != nil {
		t.Errorf("a second migrate: %+v, want the deployment %s with nothing to do", res, db.Deployment)
	}
	if err := store.CheckSchema(ctx, owner); err != nil {
		t.Errorf("CheckSchema on a named deployment: %v", err)
	}
}
