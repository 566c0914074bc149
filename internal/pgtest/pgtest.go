// Package pgtest gives each test its own freshly migrated PostgreSQL database,
// cloned from a template that is migrated once per schema version, so tests run
// in parallel without seeing each other's rows.
//
// The server comes from EXPIRYCTL_TEST_DATABASE_URL (default: the local
// cluster's postgres database as user postgres). A server that cannot be reached
// fails the test with how to start it; it never skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/store"
)

// AdminURL is the maintenance database used to create and drop test databases.
func AdminURL() string {
	if u := os.Getenv("EXPIRYCTL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// Database is one test's private database.
type Database struct {
	// URL reaches the database, for code (or a built binary) that dials itself.
	URL string
	// Pool is connected to it and closed in cleanup.
	Pool *pgxpool.Pool
	// Name is the database's name.
	Name string
}

// New creates a migrated database for t and drops it when t ends.
func New(tb testing.TB) *Database {
	tb.Helper()
	db := NewUnmigrated(tb, templateName(tb))
	return db
}

// NewEmpty creates a database with no expiryctl schema, for tests of
// `expiryctl migrate` and of the "schema missing" message.
func NewEmpty(tb testing.TB) *Database {
	tb.Helper()
	return NewUnmigrated(tb, "template0")
}

// NewUnmigrated creates a database copied from template.
func NewUnmigrated(tb testing.TB, template string) *Database {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, tb)
	defer admin.Close(ctx)

	name := "expiryctl_test_" + randomSuffix()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	dbURL := WithDatabase(AdminURL(), name)
	pool, err := store.Open(ctx, dbURL)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin := connectAdmin(ctx, tb)
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return &Database{URL: dbURL, Pool: pool, Name: name}
}

// Owner is the login that owns every test database and its expiryctl
// schema: CREATEROLE (to create the groups and grant them) and not a
// superuser.
const Owner = "expiryctl_test_owner"

// ensureOwner creates Owner once per cluster; the caller holds the template
// lock, so no two test binaries race on it.
func ensureOwner(ctx context.Context, admin *pgx.Conn) error {
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", Owner).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := admin.Exec(ctx, "CREATE ROLE "+Owner+" LOGIN CREATEROLE NOSUPERUSER")
	return err
}

// Login is a per-person PostgreSQL login made for one test: neither a
// superuser nor the owner, a member of the groups it was made with.
type Login struct {
	// Name is the role's name (the person's name and a random suffix).
	Name string
	// URL reaches the test's database as this login.
	URL string
	// Pool is connected as this login and closed in cleanup.
	Pool *pgxpool.Pool
}

// Login creates a login role for person (a name such as "alice"), a
// member of groups (full names, e.g. "expiryctl_operator"), connected to
// db. The role is dropped when tb ends.
func (db *Database) Login(tb testing.TB, person string, groups ...string) *Login {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, tb)
	defer admin.Close(ctx)
	name := person + "_" + randomSuffix()
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB"); err != nil {
		tb.Fatalf("pgtest: create login %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin := connectAdmin(ctx, tb)
		defer admin.Close(ctx)
		// Its sessions go first: the database is still in use by others.
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+ident); err != nil {
			tb.Errorf("pgtest: drop login %s: %v", name, err)
		}
	})
	for _, g := range groups {
		if _, err := admin.Exec(ctx, "GRANT "+pgx.Identifier{g}.Sanitize()+" TO "+ident); err != nil {
			tb.Fatalf("pgtest: grant %s to %s: %v", g, name, err)
		}
	}
	url := WithUser(db.URL, name)
	return &Login{Name: name, URL: url, Pool: Connect(tb, url)}
}

// GrantedLogin is Login, with the groups granted the way the schema's
// owner grants them (expiryctl.access_change, which writes the
// access.grant event), so that the trail accounts for the membership and
// `audit verify --reconcile` finds it in order.
func (db *Database) GrantedLogin(tb testing.TB, person string, groups ...string) *Login {
	tb.Helper()
	l := db.Login(tb, person)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, `SELECT expiryctl.access_change('', $1, $2, true)`, l.Name, groups); err != nil {
		tb.Fatalf("pgtest: grant %v to %s through expiryctl: %v", groups, l.Name, err)
	}
	return l
}

// Superuser returns a pool on db as the server's administrator (the user
// of AdminURL), for tests that act as someone above every rule.
func (db *Database) Superuser(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	admin, err := url.Parse(AdminURL())
	if err != nil {
		tb.Fatalf("pgtest: EXPIRYCTL_TEST_DATABASE_URL: %v", err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u.User = admin.User
	return Connect(tb, u.String())
}

// WithUser returns rawURL with its user replaced by user (and no password).
func WithUser(rawURL, user string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(fmt.Sprintf("pgtest: bad URL: %v", err))
	}
	u.User = url.User(user)
	return u.String()
}

// WithDatabase returns rawURL pointing at database name.
func WithDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(fmt.Sprintf("pgtest: bad admin URL: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

func connectAdmin(ctx context.Context, tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Fatalf("pgtest: PostgreSQL is required for this test and is not reachable (%v).\n"+
			"Start it with scripts/services.sh, or set EXPIRYCTL_TEST_DATABASE_URL.", err)
	}
	return conn
}

// templateName returns the name of the migrated template for this binary's
// schema version, creating it the first time. Test binaries of several packages
// run at once, so creation is guarded by an advisory lock.
func templateName(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("expiryctl_template_v%d_%s", store.LatestVersion(), migrationsDigest())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, tb)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(74001)"); err != nil {
		tb.Fatalf("pgtest: lock: %v", err)
	}
	defer admin.Exec(ctx, "SELECT pg_advisory_unlock(74001)") //nolint:errcheck // the session ends right after

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&exists); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if exists {
		staleOnce.Do(func() { dropStaleTemplates(ctx, admin, name) })
		return name
	}
	_, _ = admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	// The schema's owner is a login that is not a superuser, as in a real
	// deployment: the SECURITY DEFINER functions then run with no more than
	// an owner's rights, and tests see what such an owner cannot do.
	if err := ensureOwner(ctx, admin); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0 OWNER %s", name, Owner)); err != nil {
		tb.Fatalf("pgtest: create template: %v", err)
	}
	pool, err := store.Open(ctx, WithUser(WithDatabase(AdminURL(), name), Owner))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	_, migrateErr := store.Migrate(ctx, pool)
	pool.Close()
	if migrateErr != nil {
		tb.Fatalf("pgtest: migrate template: %v", migrateErr)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s IS_TEMPLATE true", name)); err != nil {
		tb.Fatalf("pgtest: mark template: %v", err)
	}
	staleOnce.Do(func() { dropStaleTemplates(ctx, admin, name) })
	return name
}

var staleOnce sync.Once

// dropStaleTemplates drops the templates of earlier migrations, which
// otherwise pile up on a developer's server each time a migration is edited.
// A template still in use (another checkout's tests cloning it) refuses the
// drop, and is left for next time.
func dropStaleTemplates(ctx context.Context, admin *pgx.Conn, keep string) {
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database
		WHERE datistemplate AND datname LIKE 'expiryctl\_template\_%' AND datname <> $1`, keep)
	if err != nil {
		return
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range stale {
		ident := pgx.Identifier{name}.Sanitize()
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE false"); err != nil {
			continue
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE "+ident); err != nil {
			_, _ = admin.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE true")
		}
	}
}

func migrationsDigest() string {
	return strings.ToLower(store.MigrationsDigest()[:12])
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Connect opens an extra pool on url, closed when tb ends.
func Connect(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// People hands out one login per person's name in a test, made on first
// use, each a member of every expiryctl group: tests of behaviour act as
// distinct people (four-eyes compares logins) without spelling out roles.
// Tests of who may do what make their logins with Login and exact groups.
type People struct {
	tb testing.TB
	db *Database
	mu sync.Mutex
	by map[string]*Login
}

// AllGroups are expiryctl's five groups.
var AllGroups = []string{"expiryctl_ingester", "expiryctl_operator", "expiryctl_approver", "expiryctl_auditor", "expiryctl_admin"}

// People returns the test's people on db.
func (db *Database) People(tb testing.TB) *People {
	return &People{tb: tb, db: db, by: map[string]*Login{}}
}

// Get returns person's login, making it the first time.
func (p *People) Get(person string) *Login {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.by[person]; ok {
		return l
	}
	l := p.db.Login(p.tb, person, AllGroups...)
	p.by[person] = l
	return l
}
