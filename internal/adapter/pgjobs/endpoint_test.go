package pgjobs_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// passwordEnv is the environment variable these tests' references take a
// password from, as a driver's PasswordEnv.
const passwordEnv = "EXPIRYCTL_PGJOBS_TEST_PASSWORD"

const form = "name a queue as x://USER@HOST[:PORT]/DATABASE/QUEUE"

// settle takes the settings of a reference's query, as a driver does
// with those that are not its own.
func settle(t *testing.T, e *pgjobs.Endpoint, query url.Values) {
	t.Helper()
	for k, v := range query {
		if err := e.Settings.Set(k, v[len(v)-1], "states"); err != nil {
			t.Fatalf("Set(%s): %v", k, err)
		}
	}
}

// TestParseURL: a URL typed on the command line gives the server, the
// database, the queue, the login and its settings, and the pool
// configuration reaches them.
func TestParseURL(t *testing.T) {
	t.Setenv(passwordEnv, "")
	tests := []struct {
		in                            string
		host, server, db, queue, user string
		port                          int
		password, tls                 string
	}{
		{in: "x://app@db.internal/jobs/expiry", host: "db.internal", server: "db.internal:5432/jobs", db: "jobs", queue: "expiry",
			user: "app", port: 5432},
		{in: "X://app@DB.internal:6543/jobs/expiry?sslmode=verify-full", host: "db.internal", server: "db.internal:6543/jobs", db: "jobs",
			queue: "expiry", user: "app", port: 6543, tls: "verify-full"},
		{in: "x://app:s3cret@10.0.0.5/jobs/expiry?states=cancelled,discarded&sslmode=disable", host: "10.0.0.5", server: "10.0.0.5:5432/jobs",
			db: "jobs", queue: "expiry", user: "app", port: 5432, password: "s3cret", tls: "disable"},
		{in: "x://app@[::1]:5433/jobs/emails/welcome", host: "::1", server: "[::1]:5433/jobs", db: "jobs", queue: "emails/welcome",
			user: "app", port: 5433},
		{in: "x://app@h/my%20db/my%20queue", host: "h", server: "h:5432/my db", db: "my db", queue: "my queue", user: "app", port: 5432},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, queue, query, err := pgjobs.ParseURL(tt.in, passwordEnv, form)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			query.Del("states")
			settle(t, &e, query)
			if e.Host != tt.host || e.Port != tt.port || e.Database != tt.db || e.User != tt.user || queue != tt.queue || e.Server() != tt.server {
				t.Errorf("got %s@%s:%d/%s (%s) queue %q; want %s@%s:%d/%s (%s) queue %q", e.User, e.Host, e.Port, e.Database, e.Server(), queue,
					tt.user, tt.host, tt.port, tt.db, tt.server, tt.queue)
			}
			if s := fmt.Sprintf("%v %+v %#v %s", e, e, e, e); strings.Contains(s, "s3cret") {
				t.Errorf("a printed Endpoint shows the password: %s", s)
			}
			cfg, err := e.PoolConfig()
			if err != nil {
				t.Fatalf("PoolConfig: %v", err)
			}
			c := cfg.ConnConfig
			if c.Host != tt.host || c.Database != tt.db || c.Port != uint16(tt.port) || c.User != tt.user || c.Password != tt.password {
				t.Errorf("connection config reaches %s@%s:%d/%s (password %q), want %s@%s:%d/%s (password %q)", c.User, c.Host, c.Port, c.Database,
					c.Password, tt.user, tt.host, tt.port, tt.db, tt.password)
			}
			if !sslMode(&c.Config, tt.tls) {
				t.Errorf("TLS %+v with %d fallbacks, not sslmode %q", c.TLSConfig, len(c.Fallbacks), tt.tls)
			}
		})
	}
}

// sslMode says whether c connects as libpq's sslmode mode does ("" is
// libpq's prefer).
func sslMode(c *pgconn.Config, mode string) bool {
	switch mode {
	case "disable":
		return c.TLSConfig == nil && len(c.Fallbacks) == 0
	case "require":
		return c.TLSConfig != nil && c.TLSConfig.InsecureSkipVerify && len(c.Fallbacks) == 0
	case "verify-full":
		return c.TLSConfig != nil && !c.TLSConfig.InsecureSkipVerify && c.TLSConfig.ServerName == c.Host && len(c.Fallbacks) == 0
	default: // libpq's prefer: TLS, falling back to none
		return c.TLSConfig != nil && len(c.Fallbacks) == 1 && c.Fallbacks[0].TLSConfig == nil
	}
}

// TestParseURLRefusesWithoutShowingTheInput: no error quotes the URL,
// so none can show its password.
func TestParseURLRefusesWithoutShowingTheInput(t *testing.T) {
	t.Setenv(passwordEnv, "")
	for in, says := range map[string]string{
		"x://app:s3cret@host:99999/jobs/expiry": `port "99999" is not a TCP port`,
		"x://app:s3cret@host:port/jobs/expiry":  "not a URL; " + form,
		"x://app:s3cret@/jobs/expiry":           "no host; " + form,
		"x://app:s3cret@host/jobs":              "want /DATABASE/QUEUE after the host; " + form,
		"x://app:s3cret@host/jobs/":             "want /DATABASE/QUEUE after the host; " + form,
		"x://app:s3cret@host/jobs/expiry%zz":    "not a URL; " + form,
		"x://app:s3cret@host/jobs/expiry?a=%zz": "unreadable query",
		"x://app:s3cret@ho st/jobs/expiry":      "not a URL; " + form,
	} {
		_, _, _, err := pgjobs.ParseURL(in, passwordEnv, form)
		if err == nil || err.Error() != says {
			t.Errorf("ParseURL(%s) = %v; want %q", in, err, says)
		}
	}
}

func TestParseURLTakesThePasswordFromTheEnvironment(t *testing.T) {
	t.Setenv(passwordEnv, "from-env")
	for in, want := range map[string]string{"x://app@host/jobs/expiry": "from-env", "x://app:in-url@host/jobs/expiry": "in-url"} {
		e, _, _, err := pgjobs.ParseURL(in, passwordEnv, form)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := e.PoolConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ConnConfig.Password != want || cfg.ConnConfig.User != "app" {
			t.Errorf("%s: login %q password %q, want app with %q", in, cfg.ConnConfig.User, cfg.ConnConfig.Password, want)
		}
	}
}

// TestEndpointFor: a configured connection's URL gives the server, the
// database, the login and its settings; the password argument counts
// only when the URL holds none.
func TestEndpointFor(t *testing.T) {
	t.Setenv(passwordEnv, "from-env") // EndpointFor never reads it
	tests := []struct {
		url, password  string
		host, db, user string
		port           int
		wantPassword   string
		tls, rest      string
	}{
		{url: "postgres://app@db.internal/jobs", host: "db.internal", port: 5432, db: "jobs", user: "app"},
		{url: "postgresql://app@DB.Internal:6543/jobs?sslmode=verify-full&schema=boss", password: "from-secret",
			host: "db.internal", port: 6543, db: "jobs", user: "app", wantPassword: "from-secret", tls: "verify-full", rest: "schema=boss"},
		{url: "postgres://app:in-url@10.0.0.5/my%20db?sslmode=disable", password: "from-secret",
			host: "10.0.0.5", port: 5432, db: "my db", user: "app", wantPassword: "in-url", tls: "disable"},
		{url: "postgres://app@[::1]:5433/jobs?sslmode=require&connect_timeout=5",
			host: "::1", port: 5433, db: "jobs", user: "app", tls: "require"},
	}
	for _, tt := range tests {
		e, rawQuery, err := pgjobs.EndpointFor(config.Connection{Name: "orders", URLs: []string{tt.url}}, tt.password)
		if err != nil {
			t.Errorf("EndpointFor(%s): %v", tt.url, err)
			continue
		}
		query, err := url.ParseQuery(rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		if rest := query.Get("schema"); rest != "" {
			query.Del("schema")
			if "schema="+rest != tt.rest {
				t.Errorf("EndpointFor(%s): the query's own part is schema=%s, want %s", tt.url, rest, tt.rest)
			}
		}
		settle(t, &e, query)
		for _, hidden := range []string{"in-url", "from-secret", "from-env"} {
			if strings.Contains(fmt.Sprintf("%v %+v %#v", e, e, e), hidden) {
				t.Errorf("EndpointFor(%s) printed shows %q", tt.url, hidden)
			}
		}
		cfg, err := e.PoolConfig()
		if err != nil {
			t.Errorf("PoolConfig: %v", err)
			continue
		}
		c := cfg.ConnConfig
		if c.Host != tt.host || c.Port != uint16(tt.port) || c.Database != tt.db || c.User != tt.user || c.Password != tt.wantPassword {
			t.Errorf("EndpointFor(%s) reaches %s@%s:%d/%s (password %q), want %s@%s:%d/%s (password %q)", tt.url, c.User, c.Host, c.Port, c.Database, c.Password,
				tt.user, tt.host, tt.port, tt.db, tt.wantPassword)
		}
		if !sslMode(&c.Config, tt.tls) {
			t.Errorf("EndpointFor(%s): TLS %+v with %d fallbacks, not sslmode %q", tt.url, c.TLSConfig, len(c.Fallbacks), tt.tls)
		}
	}
	for _, tt := range []struct{ url, says string }{
		{"", "names no url"},
		{"postgres://app@h", "names no database"},
		{"postgres://app@h/", "names no database"},
		{"postgres://app@h/jobs/more", "names no database"},
		{"postgres://app@h:99999/jobs", "is not a TCP port"},
		{"postgres://:s3cret@/jobs", "names no host"},
		{"postgres://app:s3cret@h:port/jobs", "is not a URL"}, // not a URL: the error must not show it
	} {
		c := config.Connection{Name: "orders"}
		if tt.url != "" {
			c.URLs = []string{tt.url}
		}
		e, _, err := pgjobs.EndpointFor(c, "")
		if err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), `connection "orders"`) {
			t.Errorf("EndpointFor(%q) = %s, %v; want it refused: %s", tt.url, e, err, tt.says)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("EndpointFor(%q): the error shows the password: %v", tt.url, err)
		}
	}
}

// TestSettings: a reference's settings are how to reach the server
// safely, nothing that changes what a session sees.
func TestSettings(t *testing.T) {
	t.Parallel()
	var s pgjobs.Settings
	for _, kv := range [][2]string{{"sslmode", "verify-ca"}, {"sslrootcert", "/ca.pem"}, {"connect_timeout", "5"}, {"application_name", "x"}} {
		if err := s.Set(kv[0], kv[1], "states"); err != nil || s[kv[0]] != kv[1] {
			t.Errorf("Set(%s, %s) = %v; settings %v", kv[0], kv[1], err, s)
		}
	}
	for key, says := range map[string]string{
		"sslmode":     `sslmode "maybe" is none of disable, allow, prefer, require, verify-ca, verify-full`,
		"search_path": `unknown setting "search_path" (known: states, sslmode, sslrootcert, sslcert, sslkey, connect_timeout, application_name)`,
		"options":     `unknown setting "options"`,
	} {
		if err := s.Set(key, "maybe", "states"); err == nil || !strings.HasPrefix(err.Error(), says) {
			t.Errorf("Set(%s) = %v; want %s", key, err, says)
		}
	}
}

// TestPoolConfigRefusesAnEndpointWithNoLogin: PostgreSQL would take the
// operating system's user.
func TestPoolConfigRefusesAnEndpointWithNoLogin(t *testing.T) {
	t.Setenv(passwordEnv, "")
	e, _, _, err := pgjobs.ParseURL("x://db.internal/jobs/expiry", passwordEnv, form)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PoolConfig(); err == nil || !strings.Contains(err.Error(), "no login") {
		t.Errorf("PoolConfig() = %v; want it refused", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"x://app:s3cret@host/jobs/expiry":     "x://app:xxxxx@host/jobs/expiry",
		"x://app:s3cret@host:port/jobs?a=b@c": "x://app:xxxxx@host:port/jobs?a=b@c",
		"x://app@host/jobs/expiry":            "x://app@host/jobs/expiry",
		"x://host/jobs/expiry?u=a:b@c":        "x://host/jobs/expiry?u=a:b@c",
		"not a url":                           "not a url",
	} {
		if got := pgjobs.Redact(in); got != want {
			t.Errorf("Redact(%s) = %s, want %s", in, got, want)
		}
	}
}
