package jobtable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

// TestParseRef: a URL typed on the command line names its server, and
// the Ref's connection is the name config.DeriveName gives that server;
// the table's name carries that name, never the server or the login.
func TestParseRef(t *testing.T) {
	t.Setenv(jobtable.PasswordEnv, "from-env")
	r, err := jobtable.ParseRef("jobtable://ops@Jobs.Internal/reservations/public.expiry_jobs?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	conn := config.DeriveName(jobtable.System, "jobs.internal:5432", "reservations")
	if r.Conn != conn || r.Name() != "jobtable://"+conn+"/public.expiry_jobs" || r.Table != "public.expiry_jobs" {
		t.Errorf("connection %q, name %q, table %q; want %q, jobtable://%s/public.expiry_jobs", r.Conn, r.Name(), r.Table, conn, conn)
	}
	if r.Server() != "jobs.internal:5432/reservations" {
		t.Errorf("Server() = %q", r.Server())
	}
	if r.ConnString != "postgres://ops:from-env@Jobs.Internal/reservations?sslmode=disable" {
		t.Errorf("connection string %q", r.ConnString)
	}
	if err := r.Login(); err != nil {
		t.Errorf("Login: %v", err)
	}
	for _, hidden := range []string{"jobs.internal:5432", "Jobs.Internal", "ops", "from-env"} {
		if strings.Contains(r.Name(), hidden) || strings.Contains(fmt.Sprintf("%v %+v %s", r, r, r), hidden) {
			t.Errorf("%s shows %q", r.Name(), hidden)
		}
	}
	r, err = jobtable.ParseRef("jobtable://[::1]:5433/my%20db/public.t")
	if err != nil {
		t.Fatal(err)
	}
	if conn := config.DeriveName(jobtable.System, "[::1]:5433", "my%20db"); r.Conn != conn {
		t.Errorf("connection %q, want %q", r.Conn, conn)
	}
	for _, bad := range []string{"jobtable://h/db", "jobtable://u:secret@h/db/notable", "jobtable:///db/s.t"} {
		_, err := jobtable.ParseRef(bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", bad, err)
		}
	}
}

// TestSplitName: a letter's table name is a connection's name and
// SCHEMA.TABLE; one whose first part could say which server to dial is
// refused.
func TestSplitName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, conn, table string }{
		{"jobtable://team-jobs/public.expiry_jobs", "team-jobs", "public.expiry_jobs"},
		{"jobtable://pg.prod-2_a/sales.jobs", "pg.prod-2_a", "sales.jobs"},
		{"jobtable://" + strings.Repeat("c", 63) + "/s.t", strings.Repeat("c", 63), "s.t"},
	} {
		conn, table, err := jobtable.SplitName(tt.name)
		if err != nil || conn != tt.conn || table != tt.table {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q", tt.name, conn, table, err, tt.conn, tt.table)
		}
	}
	for _, name := range []string{
		"jobtable://127.0.0.1:5432/jobs/public.expiry_jobs", // a server, as letters named tables before connections
		"jobtable://[::1]:5432/jobs/public.expiry_jobs",     // an IPv6 server
		"jobtable://db.internal/jobs/public.expiry_jobs",    // a host and a database: one segment too many
		"jobtable://ops@team-jobs/public.expiry_jobs",       // a login
		"jobtable://team-jobs/expiry_jobs",                  // no schema
		"jobtable://team-jobs",                              // no table
		"jobtable://team-jobs/",                             // nor here
		"jobtable:///public.expiry_jobs",                    // no connection
		"jobtable://team-jobs/public.expiry_jobs?sslmode=disable",
		"jobtable://team-jobs/public.expiry_jobs#x",
		"jobtable://-team/public.expiry_jobs",            // not a connection's name
		"jobtable://" + strings.Repeat("c", 64) + "/s.t", // nor is this, too long
		"river://team-jobs/public.expiry_jobs",           // not a jobs table's
	} {
		if conn, table, err := jobtable.SplitName(name); err == nil {
			t.Errorf("SplitName(%q) = %q, %q; want it refused", name, conn, table)
		}
	}
}

// TestRefFor: a configured connection's URL, with its settings, reaches
// the table's database as its login; the password argument counts only
// when the URL holds none; the name is the connection's and the table's.
func TestRefFor(t *testing.T) {
	t.Setenv(jobtable.PasswordEnv, "from-env") // RefFor never reads it
	tests := []struct {
		url, password                     string
		host, db, user, wantPassword, ssl string
		port                              uint16
	}{
		{url: "postgres://capture@DB.example.com/team_jobs?sslmode=require", password: "from-secret",
			host: "DB.example.com", db: "team_jobs", user: "capture", wantPassword: "from-secret", ssl: "require", port: 5432},
		{url: "postgresql://capture:in-url@10.0.0.5:6543/team_jobs?sslmode=disable", password: "from-secret",
			host: "10.0.0.5", db: "team_jobs", user: "capture", wantPassword: "in-url", ssl: "disable", port: 6543},
		{url: "postgres://capture@[::1]/my%20db?sslmode=disable",
			host: "::1", db: "my db", user: "capture", ssl: "disable", port: 5432},
	}
	for _, tt := range tests {
		ref, err := jobtable.RefFor(config.Connection{Name: "team-jobs", System: jobtable.System, URLs: []string{tt.url}}, tt.password, "public.reservation_expiry_jobs")
		if err != nil {
			t.Errorf("RefFor(%s): %v", tt.url, err)
			continue
		}
		if want := "jobtable://team-jobs/public.reservation_expiry_jobs"; ref.Name() != want || ref.Conn != "team-jobs" || ref.Table != "public.reservation_expiry_jobs" {
			t.Errorf("RefFor(%s): name %s, connection %q, table %q; want %s", tt.url, ref.Name(), ref.Conn, ref.Table, want)
		}
		if err := ref.Login(); err != nil {
			t.Errorf("RefFor(%s): Login: %v", tt.url, err)
		}
		for _, hidden := range []string{tt.host, strings.ToLower(tt.host), "capture", "in-url", "from-secret", "from-env"} {
			if strings.Contains(ref.Name(), hidden) || strings.Contains(fmt.Sprintf("%v %+v %s", ref, ref, ref), hidden) {
				t.Errorf("RefFor(%s) printed shows %q: %s", tt.url, hidden, ref.Name())
			}
		}
		cfg, err := connConfig(ref)
		if err != nil {
			t.Errorf("RefFor(%s): its connection string: %v", tt.url, err)
			continue
		}
		if cfg.Host != tt.host || cfg.Port != tt.port || cfg.Database != tt.db || cfg.User != tt.user || cfg.Password != tt.wantPassword {
			t.Errorf("RefFor(%s) reaches %s@%s:%d/%s (password %q), want %s@%s:%d/%s (password %q)", tt.url, cfg.User, cfg.Host, cfg.Port, cfg.Database,
				cfg.Password, tt.user, tt.host, tt.port, tt.db, tt.wantPassword)
		}
		if (cfg.TLSConfig == nil) != (tt.ssl == "disable") {
			t.Errorf("RefFor(%s): TLS %v, want sslmode %s", tt.url, cfg.TLSConfig != nil, tt.ssl)
		}
	}
	for _, tt := range []struct{ url, table string }{
		{"", "public.t"}, // no url
		{"postgres://capture@h", "public.t"},
		{"postgres://capture@h/", "public.t"},
		{"postgres://capture@h/db/more", "public.t"},
		{"postgres:///db", "public.t"},
		{"postgres://capture@h/db", "t"},
		{"postgres://capture:secret@h:port/db", "public.t"}, // not a URL: the error must not show it
	} {
		c := config.Connection{Name: "team-jobs", System: jobtable.System}
		if tt.url != "" {
			c.URLs = []string{tt.url}
		}
		ref, err := jobtable.RefFor(c, "", tt.table)
		if err == nil {
			t.Errorf("RefFor(%q, %q) = %s; want it refused", tt.url, tt.table, ref)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("RefFor(%q): the error shows the password: %v", tt.url, err)
		}
	}
}

// TestLogin: a Ref that names no login reaches nothing, refused before
// anything is dialled: PostgreSQL would take the operating system's user.
func TestLogin(t *testing.T) {
	t.Setenv(jobtable.PasswordEnv, "")
	m := reservationMapping()
	// Nothing listens on port 1: a refusal that dialled would say so.
	fromURL, err := jobtable.ParseRef("jobtable://127.0.0.1:1/team_jobs/" + m.Table)
	if err != nil {
		t.Fatal(err)
	}
	fromConfig, err := jobtable.RefFor(config.Connection{Name: "team-jobs", URLs: []string{"postgres://127.0.0.1:1/team_jobs"}}, "pw", m.Table)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []jobtable.Ref{fromURL, fromConfig} {
		err := ref.Login()
		if err == nil || !strings.Contains(err.Error(), "no login") || !strings.Contains(err.Error(), ref.Name()) {
			t.Fatalf("%s: Login() = %v; want it refused naming the table", ref, err)
		}
		if _, serr := jobtable.OpenSource(context.Background(), ref, m, jobtable.SourceOptions{}); serr == nil || serr.Error() != err.Error() {
			t.Errorf("%s: OpenSource = %v; want Login's refusal", ref, serr)
		}
		if _, rerr := jobtable.OpenRetrier(context.Background(), ref, m, jobtable.RetrierOptions{}); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("%s: OpenRetrier = %v; want Login's refusal", ref, rerr)
		}
	}
}

// TestOpenRefusesAnotherTablesMapping: a mapping opens only the table it
// maps, refused before anything is dialled.
func TestOpenRefusesAnotherTablesMapping(t *testing.T) {
	t.Parallel()
	ref, err := jobtable.RefFor(config.Connection{Name: "team-jobs", URLs: []string{"postgres://capture@127.0.0.1:1/team_jobs"}}, "", "public.other_jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobtable.OpenSource(context.Background(), ref, reservationMapping(), jobtable.SourceOptions{}); err == nil ||
		!strings.Contains(err.Error(), "its mapping is of table public.reservation_expiry_jobs") {
		t.Errorf("OpenSource = %v; want the table and the mapping's refused", err)
	}
	if _, err := jobtable.OpenRetrier(context.Background(), ref, reservationMapping(), jobtable.RetrierOptions{}); err == nil ||
		!strings.Contains(err.Error(), "its mapping is of table public.reservation_expiry_jobs") {
		t.Errorf("OpenRetrier = %v; want the table and the mapping's refused", err)
	}
}

// TestConfigRules: a jobs table's connection is one postgres:// URL
// naming its login and its database.
func TestConfigRules(t *testing.T) {
	t.Parallel()
	if jobtable.ConfigRules.System != jobtable.System {
		t.Errorf("ConfigRules are %q's", jobtable.ConfigRules.System)
	}
	for _, urls := range [][]string{
		{"postgres://capture@db.internal/team_jobs"},
		{"postgresql://capture@db.internal:6543/team_jobs?sslmode=verify-full"},
	} {
		if err := jobtable.ConfigRules.Check(config.Connection{Name: "team-jobs", System: jobtable.System, URLs: urls}); err != nil {
			t.Errorf("Check(%v): %v", urls, err)
		}
	}
	for _, tt := range []struct {
		urls []string
		says string
	}{
		{nil, "no url"},
		{[]string{"postgres://db.internal/team_jobs"}, "names no login"},
		{[]string{"postgres://:secret@db.internal/team_jobs"}, "names no login"},
		{[]string{"mysql://capture@db.internal/team_jobs"}, "is not a postgres:// URL"},
		{[]string{"jobtable://capture@db.internal/team_jobs/public.t"}, "is not a postgres:// URL"},
		{[]string{"postgres://capture@db.internal"}, "names no database"},
		{[]string{"postgres://capture@a/team_jobs", "postgres://capture@b/team_jobs"}, "one url"},
	} {
		err := jobtable.ConfigRules.Check(config.Connection{Name: "team-jobs", System: jobtable.System, URLs: tt.urls})
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Check(%v) = %v; want it refused: %s", tt.urls, err, tt.says)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Check(%v): the error shows the password: %v", tt.urls, err)
		}
	}
}

// connConfig is how pgx reads ref's connection string.
func connConfig(ref jobtable.Ref) (*pgconn.Config, error) { return pgconn.ParseConfig(ref.ConnString) }

// TestMappingInFindsTheMappingOfBefore: a mapping two admins approved
// under the server's name of before connections had names is the mapping
// of the connection that server's name derives to, and of no other.
func TestMappingInFindsTheMappingOfBefore(t *testing.T) {
	t.Parallel()
	derived := config.DeriveName("jobtable", "db.internal:5432", "jobs")
	tables := map[string]json.RawMessage{
		"jobtable://db.internal:5432/jobs/public.expiry_jobs": json.RawMessage(`{"old":true}`),
		"jobtable://named/public.other":                       json.RawMessage(`{"new":true}`),
	}
	for _, c := range []struct {
		conn, table, want string
	}{
		{derived, "public.expiry_jobs", `{"old":true}`},
		{"named", "public.other", `{"new":true}`},
		{"other-conn", "public.expiry_jobs", ""},
		{derived, "public.other", ""},
	} {
		ref, err := jobtable.RefFor(config.Connection{Name: c.conn, URLs: []string{"postgres://u@h/db"}}, "", c.table)
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := ref.MappingIn(tables)
		if string(raw) != c.want || ok != (c.want != "") {
			t.Errorf("%s %s: %s, %v; want %q", c.conn, c.table, raw, ok, c.want)
		}
	}
}
