package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestBootstrapThenAnOwnerWithoutCreateRole sets a deployment up as
// docs/governance.md says: a DBA bootstraps the groups for an owner that
// has no CREATEROLE, and that owner migrates a database of its own and
// grants a person a group; the person works, and the owner could not
// have granted before the bootstrap.
func TestBootstrapThenAnOwnerWithoutCreateRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	owner := db.Login(t, "owner") // in no group, NOCREATEROLE
	person := db.Login(t, "person")
	admin := db.Superuser(t)
	ident := pgx.Identifier{owner.Name}.Sanitize()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" OWNER TO "+ident); err != nil {
		t.Fatal(err)
	}
	// What the owner comes to own must go back before its role is dropped.
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "REASSIGN OWNED BY "+ident+" TO postgres")
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+ident)
	})

	dba := newCLI(db.URL, "")
	printed := dba.ok(t, "access", "bootstrap", owner.Name, "--print")
	if !strings.Contains(printed.stdout, `GRANT "expiryctl_operator" TO "`+owner.Name+`" WITH ADMIN OPTION;`) {
		t.Errorf("bootstrap --print:\n%s", printed.stdout)
	}
	var admins int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member WHERE m.rolname = $1`, owner.Name).Scan(&admins); err != nil || admins != 0 {
		t.Fatalf("--print changed the cluster: %d memberships (%v)", admins, err)
	}

	asOwner := newCLI(owner.URL, "")
	asOwner.ok(t, "migrate")
	if r := asOwner.exits(t, 4, "access", "grant", person.Name, "expiryctl_operator"); !strings.Contains(r.stderr, "expiryctl access bootstrap") {
		t.Errorf("an owner without CREATEROLE or ADMIN OPTION granted a group: %s", r)
	}

	done := dba.ok(t, "access", "bootstrap", owner.Name)
	if !strings.Contains(done.stdout, owner.Name+" administers expiryctl_ingester, expiryctl_operator") {
		t.Errorf("bootstrap:\n%s", done)
	}
	granted := asOwner.ok(t, "access", "grant", person.Name, "expiryctl_operator")
	newCLI(person.URL, "").ok(t, "dlq", "summary")
	list := asOwner.ok(t, "access", "list", "-o", "json")
	if !strings.Contains(list.stdout, person.Name) {
		t.Errorf("access list after the grant:\n%s", list.stdout)
	}
	// The owner with ADMIN OPTION is named as advisory, as the owner.
	if !granted.advisory {
		t.Errorf("the owner was not told governance is advisory for it: %s", granted)
	}
}

// TestANamedDeploymentThroughTheCLI sets a deployment up on a shared
// cluster as docs/governance.md says: its groups carry its name, the
// owner's first migrate names it, and grants go to its own groups.
func TestANamedDeploymentThroughTheCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	owner := db.Login(t, "owner")
	person := db.Login(t, "person")
	admin := db.Superuser(t)
	ownerIdent := pgx.Identifier{owner.Name}.Sanitize()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" OWNER TO "+ownerIdent); err != nil {
		t.Fatal(err)
	}
	d := pgtest.DeploymentName("cli")
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "REASSIGN OWNED BY "+ownerIdent+" TO postgres")
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+ownerIdent)
		for _, g := range d.Groups() {
			_, _ = admin.Exec(ctx, "DROP OWNED BY "+g)
			_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+g)
		}
	})

	dba := newCLI(db.URL, "")
	dba.exits(t, 2, "access", "bootstrap", owner.Name, "--deployment", "Not-A-Name")
	done := dba.ok(t, "access", "bootstrap", owner.Name, "--deployment", string(d))
	if want := "next, as " + owner.Name + ": expiryctl migrate --deployment " + string(d); !strings.Contains(done.stdout, want) {
		t.Errorf("bootstrap does not say %q:\n%s", want, done)
	}
	asOwner := newCLI(owner.URL, "")
	// Without the name the owner would install the unnamed deployment,
	// whose groups it does not administer: it is told so.
	migrated := asOwner.ok(t, "migrate", "--deployment", string(d))
	if !strings.Contains(migrated.stderr, "deployment "+string(d)+": groups "+d.MustGroup("ingester")) {
		t.Errorf("migrate does not name the deployment's groups:\n%s", migrated)
	}
	asOwner.ok(t, "access", "grant", person.Name, "operator")
	if r := asOwner.exits(t, 4, "access", "grant", person.Name, "expiryctl_elsewhere_admin"); !strings.Contains(r.stderr, "not a group of this database's deployment") {
		t.Errorf("another deployment's group: %s", r)
	}
	newCLI(person.URL, "").ok(t, "dlq", "summary")
	list := asOwner.ok(t, "access", "list", "-o", "json")
	if !strings.Contains(list.stdout, d.MustGroup("operator")) {
		t.Errorf("access list does not show the deployment's group:\n%s", list.stdout)
	}
	if r := asOwner.run(t, "migrate", "--deployment", "other"); r.code == 0 || !strings.Contains(r.stderr, "fixed at install") {
		t.Errorf("migrate under another name: %s", r)
	}
	if r := asOwner.ok(t, "migrate"); !strings.Contains(r.stderr, "up to date") {
		t.Errorf("a later migrate without the name: %s", r)
	}
}
