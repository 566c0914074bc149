package riverjobs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

// TestParseRef: a URL typed on the command line names its server, and
// the Ref's connection is the name config.DeriveName gives that server;
// the queue's name carries that name, never the server or the login.
func TestParseRef(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "")
	tests := []struct {
		in                  string
		authority, db       string // the server DeriveName names, its database as the URL escapes it
		queue, user, states string
	}{
		{in: "river://app@db.internal/jobs/expiry", authority: "db.internal:5432", db: "jobs", queue: "expiry", user: "app", states: "discarded"},
		{in: "RIVER://app@DB.internal:6543/jobs/expiry?sslmode=verify-full", authority: "db.internal:6543", db: "jobs", queue: "expiry",
			user: "app", states: "discarded"},
		{in: "river://app:s3cret@10.0.0.5/jobs/expiry?states=cancelled,discarded&sslmode=disable", authority: "10.0.0.5:5432", db: "jobs", queue: "expiry",
			user: "app", states: "cancelled,discarded"},
		{in: "river://app@[::1]:5433/jobs/expiry?states=discarded,discarded", authority: "[::1]:5433", db: "jobs", queue: "expiry", user: "app", states: "discarded"},
		{in: "river://app@h/my%20db/my%20queue", authority: "h:5432", db: "my%20db", queue: "my%20queue", user: "app", states: "discarded"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ref, err := riverjobs.ParseRef(tt.in)
			if err != nil {
				t.Fatalf("ParseRef: %v", err)
			}
			conn := config.DeriveName(riverjobs.System, tt.authority, tt.db)
			if ref.Conn != conn || ref.Name() != "river://"+conn+"/"+tt.queue || ref.User != tt.user || strings.Join(ref.States, ",") != tt.states {
				t.Errorf("got %s (connection %q) user %q states %v; want river://%s/%s user %q states %s",
					ref.Name(), ref.Conn, ref.User, ref.States, conn, tt.queue, tt.user, tt.states)
			}
			if !riverjobs.IsRef(tt.in) {
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

func TestParseRefRefusesWithoutShowingThePassword(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "")
	for _, in := range []string{
		"river://app:s3cret@host:99999/jobs/expiry",
		"river://app:s3cret@host/jobs",
		"river://app:s3cret@host/jobs/",
		"river://app:s3cret@/jobs/expiry",
		"river://app:s3cret@host/jobs/expiry?states=completed",
		"river://app:s3cret@host/jobs/expiry?sslmode=maybe",
		"river://app:s3cret@host/jobs/expiry?search_path=evil",
		"river://app:s3cret@host:port/jobs/expiry",
		"river://app:s3cret@ho st/jobs/expiry%zz",
		"river://app:s3cret@host/jobs/" + strings.Repeat("q", 128),
	} {
		_, err := riverjobs.ParseRef(in)
		if err == nil {
			t.Errorf("ParseRef(%s) took it", in)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseRef's error shows the password: %v", err)
		}
	}
	if riverjobs.IsRef("postgres://host/db") {
		t.Error("IsRef took a postgres URL")
	}
}

func TestParseRefTakesThePasswordFromTheEnvironment(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "from-env")
	ref, err := riverjobs.ParseRef("river://app@host/jobs/expiry")
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
// queue; one whose first part could say which server to dial is refused.
func TestSplitName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, conn, queue string }{
		{"river://orders/expiry", "orders", "expiry"},
		{"RIVER://orders/expiry", "orders", "expiry"},
		{"river://river.prod-2_a/my%20queue", "river.prod-2_a", "my%20queue"},
		{"river://orders/expiry?states=cancelled,discarded", "orders", "expiry?states=cancelled,discarded"},
		{"river://" + strings.Repeat("c", 63) + "/q", strings.Repeat("c", 63), "q"},
	} {
		conn, queue, err := riverjobs.SplitName(tt.name)
		if err != nil || conn != tt.conn || queue != tt.queue {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q", tt.name, conn, queue, err, tt.conn, tt.queue)
		}
	}
	for _, name := range []string{
		"river://127.0.0.1:5432/jobs/expiry",        // a server, as letters named queues before connections
		"river://[::1]:5432/jobs/expiry",            // an IPv6 server
		"river://db.internal/jobs/expiry",           // a host and a database: one segment too many
		"river://app@orders/expiry",                 // a login
		"river://app:s3cret@orders/expiry",          // a login with its password
		"river://app:s3cret@db:5432/jobs/expiry",    // the URL form, password and all
		"river://orders/expiry/more",                // too many segments
		"river://orders",                            // no queue
		"river://orders/",                           // an empty queue
		"river:///expiry",                           // no connection
		"river://-orders/expiry",                    // not a connection's name
		"river://" + strings.Repeat("c", 64) + "/q", // nor is this, too long
		"postgres://orders/expiry",                  // not River's
	} {
		conn, queue, err := riverjobs.SplitName(name)
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
// database, the login and its settings; the queue's part gives the queue
// and a capture's states; the password argument counts only when the URL
// holds none.
func TestRefFor(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "from-env") // RefFor never reads it
	tests := []struct {
		url, password, queue      string
		host, db, user, q, states string
		port                      int
		wantPassword              string
	}{
		{url: "postgres://app@db.internal/jobs", queue: "expiry",
			host: "db.internal", port: 5432, db: "jobs", user: "app", q: "expiry", states: "discarded"},
		{url: "postgresql://app@DB.Internal:6543/jobs?sslmode=verify-full", password: "from-secret", queue: "expiry?states=cancelled,discarded",
			host: "db.internal", port: 6543, db: "jobs", user: "app", q: "expiry", states: "cancelled,discarded", wantPassword: "from-secret"},
		{url: "postgres://app:in-url@10.0.0.5/my%20db?sslmode=disable", password: "from-secret", queue: "my%20queue",
			host: "10.0.0.5", port: 5432, db: "my db", user: "app", q: "my queue", states: "discarded", wantPassword: "in-url"},
		{url: "postgres://app@[::1]:5433/jobs?sslmode=require&connect_timeout=5", queue: "expiry",
			host: "::1", port: 5433, db: "jobs", user: "app", q: "expiry", states: "discarded"},
	}
	for _, tt := range tests {
		ref, err := riverjobs.RefFor(config.Connection{Name: "orders", System: riverjobs.System, URLs: []string{tt.url}}, tt.password, tt.queue)
		if err != nil {
			t.Errorf("RefFor(%s, %s): %v", tt.url, tt.queue, err)
			continue
		}
		if ref.Conn != "orders" || ref.Host != tt.host || ref.Port != tt.port || ref.Database != tt.db || ref.User != tt.user || ref.Queue != tt.q ||
			strings.Join(ref.States, ",") != tt.states {
			t.Errorf("RefFor(%s, %s) = %s %s@%s:%d/%s queue %q states %v; want orders %s@%s:%d/%s queue %q states %s", tt.url, tt.queue,
				ref.Conn, ref.User, ref.Host, ref.Port, ref.Database, ref.Queue, ref.States, tt.user, tt.host, tt.port, tt.db, tt.q, tt.states)
		}
		if want := "river://orders/" + strings.SplitN(tt.queue, "?", 2)[0]; ref.Name() != want {
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
		{"postgres://app@h/jobs", "expiry?states=completed"},
		{"postgres://app@h/jobs", ""},
		{"postgres://app@h/jobs", "?states=discarded"},
		{"postgres://app@h/jobs", strings.Repeat("q", 128)},
		{"postgres://app@h/jobs", "ex%zzpiry"},
	} {
		c := config.Connection{Name: "orders", System: riverjobs.System, URLs: []string{tt.url}}
		if ref, err := riverjobs.RefFor(c, "", tt.queue); err == nil {
			t.Errorf("RefFor(%q, %q) = %s; want it refused", tt.url, tt.queue, ref)
		}
	}
}

// TestLogin: a Ref that names no login reaches nothing: PostgreSQL would
// take the operating system's user.
func TestLogin(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "")
	fromURL, err := riverjobs.ParseRef("river://db.internal/jobs/expiry")
	if err != nil {
		t.Fatal(err)
	}
	fromConfig, err := riverjobs.RefFor(config.Connection{Name: "orders", URLs: []string{"postgres://db.internal/jobs"}}, "pw", "expiry")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []riverjobs.Ref{fromURL, fromConfig} {
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

// TestConfigRules: a River connection is one postgres:// URL naming its
// login and its database.
func TestConfigRules(t *testing.T) {
	t.Parallel()
	if riverjobs.ConfigRules.System != riverjobs.System {
		t.Errorf("ConfigRules are %q's", riverjobs.ConfigRules.System)
	}
	for _, urls := range [][]string{
		{"postgres://app@db.internal/jobs"},
		{"postgresql://app@db.internal:6543/jobs?sslmode=verify-full"},
	} {
		if err := riverjobs.ConfigRules.Check(config.Connection{Name: "orders", System: riverjobs.System, URLs: urls}); err != nil {
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
		{[]string{"river://app@db.internal/jobs/expiry"}, "is not a postgres:// URL"},
		{[]string{"postgres://app@db.internal"}, "names no database"},
		{[]string{"postgres://app@db.internal/jobs?search_path=evil"}, "unknown setting"},
		{[]string{"postgres://app@a/jobs", "postgres://app@b/jobs"}, "one url"},
	} {
		err := riverjobs.ConfigRules.Check(config.Connection{Name: "orders", System: riverjobs.System, URLs: tt.urls})
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Check(%v) = %v; want it refused: %s", tt.urls, err, tt.says)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%v): the error shows the password: %v", tt.urls, err)
		}
	}
}
