package pgboss_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
)

// TestParseRef: a URL typed on the command line names its server, and
// the Ref's connection is the name config.DeriveName gives that server
// (and pg-boss's schema, when not pgboss); the queue's name carries that
// name, never the server or the login.
func TestParseRef(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "")
	tests := []struct {
		in                string
		authority, what   string // what DeriveName names: HOST:PORT, and the database (and schema)
		queue, name, user string
		schema            string
	}{
		{in: "pgboss://app@db.internal/jobs/expiry", authority: "db.internal:5432", what: "jobs", queue: "expiry", name: "expiry",
			user: "app", schema: "pgboss"},
		{in: "PGBOSS://app@DB.internal:6543/jobs/expiry?sslmode=verify-full", authority: "db.internal:6543", what: "jobs", queue: "expiry",
			name: "expiry", user: "app", schema: "pgboss"},
		{in: "pgboss://app:s3cret@10.0.0.5/jobs/expiry?schema=Boss&sslmode=disable", authority: "10.0.0.5:5432", what: "jobs/boss", queue: "expiry",
			name: "expiry", user: "app", schema: "boss"},
		{in: "pgboss://app@[::1]:5433/jobs/emails/welcome", authority: "[::1]:5433", what: "jobs", queue: "emails/welcome",
			name: "emails%2Fwelcome", user: "app", schema: "pgboss"},
		{in: "pgboss://app@h/my%20db/send.v2-x_y", authority: "h:5432", what: "my%20db", queue: "send.v2-x_y", name: "send.v2-x_y",
			user: "app", schema: "pgboss"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ref, err := pgboss.ParseRef(tt.in)
			if err != nil {
				t.Fatalf("ParseRef: %v", err)
			}
			conn := config.DeriveName(pgboss.System, tt.authority, tt.what)
			if ref.Conn != conn || ref.Name() != "pgboss://"+conn+"/"+tt.name || ref.User != tt.user || ref.Queue != tt.queue || ref.Schema != tt.schema {
				t.Errorf("got %s (connection %q, queue %q) user %q schema %q; want pgboss://%s/%s (queue %q) user %q schema %q",
					ref.Name(), ref.Conn, ref.Queue, ref.User, ref.Schema, conn, tt.name, tt.queue, tt.user, tt.schema)
			}
			if !pgboss.IsRef(tt.in) {
				t.Error("IsRef is false")
			}
			for _, hidden := range []string{tt.authority, "@", "s3cret"} {
				if strings.Contains(ref.Name(), hidden) {
					t.Errorf("Name() %q shows %q", ref.Name(), hidden)
				}
			}
			if s := fmt.Sprintf("%v %+v %#v %s %s", ref, ref, ref, ref, ref.DatabaseName()); strings.Contains(s, "s3cret") {
				t.Errorf("a printed Ref shows the password: %s", s)
			}
		})
	}
}

// TestParseRefTellsSchemasApart: two pg-boss schemas of one database are
// two pg-boss instances, and so two connections.
func TestParseRefTellsSchemasApart(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "")
	a, err := pgboss.ParseRef("pgboss://app@h/jobs/expiry")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgboss.ParseRef("pgboss://app@h/jobs/expiry?schema=other")
	if err != nil {
		t.Fatal(err)
	}
	if a.Conn == b.Conn || a.Server() == b.Server() {
		t.Errorf("schemas pgboss and other are one connection %q (%s, %s)", a.Conn, a.Server(), b.Server())
	}
	if b.Server() != "h:5432/jobs?schema=other" {
		t.Errorf("Server() = %s", b.Server())
	}
}

func TestParseRefRefusesWithoutShowingThePassword(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "")
	for _, in := range []string{
		"pgboss://app:s3cret@host:99999/jobs/expiry",
		"pgboss://app:s3cret@host/jobs",
		"pgboss://app:s3cret@host/jobs/",
		"pgboss://app:s3cret@/jobs/expiry",
		"pgboss://app:s3cret@host/jobs/expiry?states=failed",
		"pgboss://app:s3cret@host/jobs/expiry?sslmode=maybe",
		"pgboss://app:s3cret@host/jobs/expiry?search_path=evil",
		"pgboss://app:s3cret@host/jobs/expiry?schema=no-dash",
		"pgboss://app:s3cret@host/jobs/expiry?schema=%22Quoted%22",
		"pgboss://app:s3cret@host:port/jobs/expiry",
		"pgboss://app:s3cret@ho st/jobs/expiry%zz",
		"pgboss://app:s3cret@host/jobs/ex%20piry",
		"pgboss://app:s3cret@host/jobs/ex:piry",
		"river://app:s3cret@host/jobs/expiry",
	} {
		_, err := pgboss.ParseRef(in)
		if err == nil {
			t.Errorf("ParseRef(%s) took it", in)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseRef's error shows the password: %v", err)
		}
	}
	if pgboss.IsRef("postgres://host/db") {
		t.Error("IsRef took a postgres URL")
	}
}

func TestParseRefTakesThePasswordFromTheEnvironment(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "from-env")
	ref, err := pgboss.ParseRef("pgboss://app@host/jobs/expiry")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.Password != "from-env" || cfg.ConnConfig.User != "app" {
		t.Errorf("login %q password %q, want app with the environment's", cfg.ConnConfig.User, cfg.ConnConfig.Password)
	}
}

// TestSplitName: a letter's queue name is a connection's name and the
// queue, path-escaped; one whose first part could say which server to
// dial is refused.
func TestSplitName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, conn, queue string }{
		{"pgboss://orders/expiry", "orders", "expiry"},
		{"PGBOSS://orders/expiry", "orders", "expiry"},
		{"pgboss://pgboss.prod-2_a/emails%2Fwelcome", "pgboss.prod-2_a", "emails%2Fwelcome"},
		{"pgboss://" + strings.Repeat("c", 63) + "/q", strings.Repeat("c", 63), "q"},
	} {
		conn, queue, err := pgboss.SplitName(tt.name)
		if err != nil || conn != tt.conn || queue != tt.queue {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q", tt.name, conn, queue, err, tt.conn, tt.queue)
		}
	}
	for _, name := range []string{
		"pgboss://127.0.0.1:5432/jobs/expiry",        // a server
		"pgboss://[::1]:5432/jobs/expiry",            // an IPv6 server
		"pgboss://db.internal/jobs/expiry",           // a host and a database: one segment too many
		"pgboss://app@orders/expiry",                 // a login
		"pgboss://app:s3cret@orders/expiry",          // a login with its password
		"pgboss://app:s3cret@db:5432/jobs/expiry",    // the URL form, password and all
		"pgboss://orders/emails/welcome",             // a '/' not escaped
		"pgboss://orders/expiry?schema=other",        // settings are the connection's
		"pgboss://orders",                            // no queue
		"pgboss://orders/",                           // an empty queue
		"pgboss:///expiry",                           // no connection
		"pgboss://-orders/expiry",                    // not a connection's name
		"pgboss://" + strings.Repeat("c", 64) + "/q", // nor is this, too long
		"river://orders/expiry",                      // not pg-boss's
	} {
		conn, queue, err := pgboss.SplitName(name)
		if err == nil {
			t.Errorf("SplitName(%q) = %q, %q; want it refused", name, conn, queue)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("SplitName(%q): the error shows the password: %v", name, err)
		}
	}
}

// TestRefFor: a configured connection's URL gives the server, the
// database, the login, pg-boss's schema and the settings; the queue's part
// gives the queue; the password argument counts only when the URL holds
// none.
func TestRefFor(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "from-env") // RefFor never reads it
	tests := []struct {
		url, password, queue      string
		host, db, user, q, schema string
		port                      int
		wantPassword, wantQueue   string
	}{
		{url: "postgres://app@db.internal/jobs", queue: "expiry",
			host: "db.internal", port: 5432, db: "jobs", user: "app", q: "expiry", schema: "pgboss"},
		{url: "postgresql://app@DB.Internal:6543/jobs?sslmode=verify-full&schema=boss", password: "from-secret", queue: "emails%2Fwelcome",
			host: "db.internal", port: 6543, db: "jobs", user: "app", q: "emails/welcome", schema: "boss", wantPassword: "from-secret"},
		{url: "postgres://app:in-url@10.0.0.5/my%20db?sslmode=disable", password: "from-secret", queue: "expiry",
			host: "10.0.0.5", port: 5432, db: "my db", user: "app", q: "expiry", schema: "pgboss", wantPassword: "in-url"},
		{url: "postgres://app@[::1]:5433/jobs?sslmode=require&connect_timeout=5", queue: "expiry",
			host: "::1", port: 5433, db: "jobs", user: "app", q: "expiry", schema: "pgboss"},
	}
	for _, tt := range tests {
		ref, err := pgboss.RefFor(config.Connection{Name: "orders", System: pgboss.System, URLs: []string{tt.url}}, tt.password, tt.queue)
		if err != nil {
			t.Errorf("RefFor(%s, %s): %v", tt.url, tt.queue, err)
			continue
		}
		if ref.Conn != "orders" || ref.Host != tt.host || ref.Port != tt.port || ref.Database != tt.db || ref.User != tt.user || ref.Queue != tt.q ||
			ref.Schema != tt.schema {
			t.Errorf("RefFor(%s, %s) = %s %s@%s:%d/%s queue %q schema %q; want orders %s@%s:%d/%s queue %q schema %q", tt.url, tt.queue,
				ref.Conn, ref.User, ref.Host, ref.Port, ref.Database, ref.Queue, ref.Schema, tt.user, tt.host, tt.port, tt.db, tt.q, tt.schema)
		}
		if want := "pgboss://orders/" + tt.queue; ref.Name() != want {
			t.Errorf("Name() = %q, want %q", ref.Name(), want)
		}
		for _, hidden := range []string{tt.host, "app", "in-url", "from-secret", "from-env"} {
			if strings.Contains(ref.Name(), hidden) || strings.Contains(fmt.Sprintf("%v %+v %#v", ref, ref, ref), hidden) {
				t.Errorf("RefFor(%s) printed shows %q: %s", tt.url, hidden, ref.Name())
			}
		}
		// How the endpoint reaches the server is pgjobs's (TestEndpointFor).
		if cfg, err := ref.PoolConfig(); err != nil || cfg.ConnConfig.Password != tt.wantPassword || cfg.ConnConfig.Database != tt.db {
			t.Errorf("RefFor(%s).PoolConfig() = %v; want database %s, password %q", tt.url, err, tt.db, tt.wantPassword)
		}
	}
	// What pgjobs.EndpointFor refuses of a connection's URL is pgjobs's
	// (TestEndpointFor, TestSettings); these are the queue's, and the
	// settings of the driver's own.
	for _, tt := range []struct{ url, queue string }{
		{"postgres://app@h/jobs?schema=no;drop", "expiry"},
		{"postgres://app@h/jobs", "expiry?schema=other"},
		{"postgres://app@h/jobs", ""},
		{"postgres://app@h/jobs", "ex%zzpiry"},
		{"postgres://app@h/jobs", "ex%20piry"},
	} {
		c := config.Connection{Name: "orders", System: pgboss.System, URLs: []string{tt.url}}
		if ref, err := pgboss.RefFor(c, "", tt.queue); err == nil {
			t.Errorf("RefFor(%q, %q) = %s; want it refused", tt.url, tt.queue, ref)
		}
	}
}

// TestLogin: a Ref that names no login reaches nothing: PostgreSQL would
// take the operating system's user.
func TestLogin(t *testing.T) {
	t.Setenv(pgboss.PasswordEnv, "")
	fromURL, err := pgboss.ParseRef("pgboss://db.internal/jobs/expiry")
	if err != nil {
		t.Fatal(err)
	}
	fromConfig, err := pgboss.RefFor(config.Connection{Name: "orders", URLs: []string{"postgres://db.internal/jobs"}}, "pw", "expiry")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []pgboss.Ref{fromURL, fromConfig} {
		err := ref.Login()
		if err == nil || !strings.Contains(err.Error(), "no login") || !strings.Contains(err.Error(), ref.DatabaseName()) {
			t.Errorf("%s: Login() = %v; want it refused naming %s", ref, err, ref.DatabaseName())
		}
		if _, perr := ref.PoolConfig(); perr == nil || err == nil || perr.Error() != err.Error() {
			t.Errorf("%s: PoolConfig() = %v; want Login's refusal", ref, perr)
		}
	}
	if want := `"orders" (db.internal:5432/jobs)`; fromConfig.DatabaseName() != want {
		t.Errorf("DatabaseName() = %s, want %s", fromConfig.DatabaseName(), want)
	}
}

// TestConfigRules: a pg-boss connection is one postgres:// URL naming its
// login and its database, and pg-boss's schema when not pgboss.
func TestConfigRules(t *testing.T) {
	t.Parallel()
	if pgboss.ConfigRules.System != pgboss.System {
		t.Errorf("ConfigRules are %q's", pgboss.ConfigRules.System)
	}
	for _, urls := range [][]string{
		{"postgres://app@db.internal/jobs"},
		{"postgresql://app@db.internal:6543/jobs?sslmode=verify-full&schema=jobs_boss"},
	} {
		if err := pgboss.ConfigRules.Check(config.Connection{Name: "orders", System: pgboss.System, URLs: urls}); err != nil {
			t.Errorf("Check(%v): %v", urls, err)
		}
	}
	for _, tt := range []struct {
		urls []string
		says string
	}{
		{nil, "no url"},
		{[]string{"postgres://db.internal/jobs"}, "names no login"},
		{[]string{"postgres://:s3cret@db.internal/jobs"}, "names no login"},
		{[]string{"redis://app@db.internal/0"}, "is not a postgres:// URL"},
		{[]string{"pgboss://app@db.internal/jobs/expiry"}, "is not a postgres:// URL"},
		{[]string{"postgres://app@db.internal"}, "names no database"},
		{[]string{"postgres://app@db.internal/jobs?search_path=evil"}, "unknown setting"},
		{[]string{"postgres://app@db.internal/jobs?schema=a-b"}, "schema"},
		{[]string{"postgres://app@a/jobs", "postgres://app@b/jobs"}, "one url"},
	} {
		err := pgboss.ConfigRules.Check(config.Connection{Name: "orders", System: pgboss.System, URLs: tt.urls})
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Check(%v) = %v; want it refused: %s", tt.urls, err, tt.says)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%v): the error shows the password: %v", tt.urls, err)
		}
	}
}
