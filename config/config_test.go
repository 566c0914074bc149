package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
)

// testRules stand in for the drivers' own (config imports no driver): a
// River-like and a jobs-table-like system on PostgreSQL, a RabbitMQ-like
// broker with management URLs, a Redis-like store whose URL needs no login,
// and an SQS-like cloud queue with a region, an endpoint and a profile.
var testRules = []config.Rules{
	{System: "rabbitmq", Keys: []string{"url", "management-url"}, Check: func(c config.Connection) error {
		return config.CheckURL(c, []string{"amqp", "amqps"}, true)
	}},
	{System: "river", Keys: []string{"url"}, Check: func(c config.Connection) error {
		return config.CheckURL(c, []string{"postgres", "postgresql"}, true)
	}},
	{System: "bullmq", Keys: []string{"url"}, Check: func(c config.Connection) error {
		return config.CheckURL(c, []string{"redis", "rediss"}, false)
	}},
	{System: "jobtable", Keys: []string{"url"}, Check: func(c config.Connection) error {
		return config.CheckURL(c, []string{"postgres", "postgresql"}, true)
	}},
	{System: "sqs", Keys: []string{"region", "endpoint", "profile"}, Check: func(c config.Connection) error {
		if c.Region != "" && !regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`).MatchString(c.Region) {
			return fmt.Errorf("region %q is not an AWS region's name", c.Region)
		}
		if c.Endpoint != "" {
			if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("endpoint %q is not an http:// or https:// URL with a host", c.Endpoint)
			}
		}
		return nil
	}},
}

// writeFile writes text to name in a new temporary directory with mode
// and returns its path.
func writeFile(t *testing.T, name, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // the umask may have narrowed it
		t.Fatal(err)
	}
	return path
}

// parse reads text as the file /etc/expiryctl/config.yaml with testRules.
func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("/etc/expiryctl/config.yaml", []byte(text), testRules)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cfg
}

func TestContextPicksTheOneInUse(t *testing.T) {
	t.Parallel()
	const two = "contexts:\n  prod: {}\n  staging: {}\n"
	for _, tc := range []struct {
		name, text, ask string
		want            string // the context's name; "" with wantErr unset: the empty context
		wantErr         []string
	}{
		{name: "no file, no name: the empty context", text: "", ask: "", want: ""},
		{name: "no contexts, a name", text: "contexts: {}\n", ask: "prod", wantErr: []string{`context "prod"`, "names no contexts", "expiryctl config init"}},
		{name: "one context, no current-context", text: "contexts:\n  only: {}\n", ask: "", want: "only"},
		{name: "many, no current-context", text: two, ask: "", wantErr: []string{"2 contexts and no current-context", "--context NAME", "prod, staging"}},
		{name: "many, current-context", text: "current-context: staging\n" + two, ask: "", want: "staging"},
		{name: "a name wins over current-context", text: "current-context: staging\n" + two, ask: "prod", want: "prod"},
		{name: "unknown name lists and suggests", text: two, ask: "stagin", wantErr: []string{`context "stagin" is not in /etc/expiryctl/config.yaml`,
			`did you mean "staging"?`, "its contexts: prod, staging"}},
		{name: "unknown name with nothing near", text: two, ask: "qa", wantErr: []string{`context "qa"`, "prod, staging"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := parse(t, tc.text)
			x, err := cfg.Context(tc.ask)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Context(%q) = %q, want an error", tc.ask, x.Name)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if strings.Contains(tc.name, "nothing near") && strings.Contains(err.Error(), "did you mean") {
					t.Errorf("error %q suggests a name nothing is near", err)
				}
				return
			}
			if err != nil || x == nil || x.Name != tc.want {
				t.Fatalf("Context(%q) = %+v, %v; want %q", tc.ask, x, err, tc.want)
			}
		})
	}
}

func TestContextLookups(t *testing.T) {
	t.Parallel()
	cfg := parse(t, `contexts:
  demo:
    connections:
      zeta: {system: river, url: "postgres://r@h:5432/a"}
      alpha: {system: river, url: "postgres://r@h:5432/b"}
      mq: {system: rabbitmq, url: "amqp://g@h:5672/"}
`)
	x, err := cfg.Context("")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(x.ConnectionNames(), ","); got != "alpha,mq,zeta" {
		t.Errorf("ConnectionNames = %s, want sorted", got)
	}
	var rivers []string
	for _, c := range x.OfSystem("river") {
		rivers = append(rivers, c.Name)
	}
	if got := strings.Join(rivers, ","); got != "zeta,alpha" {
		t.Errorf("OfSystem(river) = %s, want the file's order", got)
	}
	if c, ok := x.Connection("mq"); !ok || c.System != "rabbitmq" {
		t.Errorf("Connection(mq) = %+v, %v", c, ok)
	}
	if _, ok := x.Connection("MQ"); ok {
		t.Error("Connection matched a name of another case")
	}
}

func TestUnknownConnectionErrorSaysWhereAndWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  config.UnknownConnectionError
		want []string
		not  []string
	}{
		{name: "in a context of a file", err: config.UnknownConnectionError{Name: "rivr", System: "river", Context: "prod",
			Known: []string{"jobs", "river"}, File: "/home/a/.config/expiryctl/config.yaml"},
			want: []string{`connection "rivr" (river) is not configured`, `context "prod" of /home/a/.config/expiryctl/config.yaml does not define it`,
				`did you mean "river"?`, "(defined: jobs, river)", "nothing was dialled", "connections:", "docs/configuration.md"}},
		{name: "a file with no context", err: config.UnknownConnectionError{Name: "river", System: "river", File: "/etc/x.yaml"},
			want: []string{"/etc/x.yaml does not define it"}, not: []string{"did you mean", "defined:"}},
		{name: "no file", err: config.UnknownConnectionError{Name: "river-127.0.0.1-5432-db-0a1b2c3d", System: "river"},
			want: []string{"no configuration file defines it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg := tc.err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("%q says %q", msg, n)
				}
			}
			if tc.err.Rule() != "connection-unknown" {
				t.Errorf("Rule() = %q", tc.err.Rule())
			}
		})
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"river": true, "prod-eu.1": true, "a_b": true, "9": true, strings.Repeat("a", 63): true,
		"": false, "-x": false, ".x": false, "a b": false, "a:b": false, "a/b": false, "a@b": false, strings.Repeat("a", 64): false,
	} {
		if got := config.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSecretResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"RIVER_PW": "s3cret-env"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name    string
		secret  config.Secret
		want    string
		wantErr []string
	}{
		{name: "no source", secret: config.Secret{}, want: ""},
		{name: "env set", secret: config.Secret{Env: "RIVER_PW"}, want: "s3cret-env"},
		{name: "env unset", secret: config.Secret{Env: "NOT_SET"}, wantErr: []string{`connection "river"`, "$NOT_SET", "not set", "export it"}},
		{name: "file, first line", secret: config.Secret{File: file("ok", "s3cret-file\nsecond line\n")}, want: "s3cret-file"},
		{name: "file, CRLF", secret: config.Secret{File: file("crlf", "s3cret-crlf\r\n")}, want: "s3cret-crlf"},
		{name: "file, no newline", secret: config.Secret{File: file("bare", "s3cret-bare")}, want: "s3cret-bare"},
		{name: "file missing", secret: config.Secret{File: filepath.Join(dir, "absent")}, wantErr: []string{`connection "river"`, "absent", "cannot be read", "no such file"}},
		{name: "file, empty first line", secret: config.Secret{File: file("empty", "\nnot-this\n")}, wantErr: []string{"first line is empty"}},
		{name: "file, empty", secret: config.Secret{File: file("zero", "")}, wantErr: []string{"first line is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.secret.Resolve("river", getenv)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Resolve = %q, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "not-this") {
					t.Errorf("error %q shows the file's text", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSecretDescribeNamesTheSourceNotTheValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    config.Secret
		want string
		set  bool
	}{
		{config.Secret{}, "", false},
		{config.Secret{Env: "PGPASSWORD"}, "$PGPASSWORD", true},
		{config.Secret{File: "/run/secrets/pg"}, "/run/secrets/pg", true},
	} {
		if got := tc.s.Describe(); got != tc.want || tc.s.Set() != tc.set {
			t.Errorf("%+v: Describe = %q, Set = %v; want %q, %v", tc.s, got, tc.s.Set(), tc.want, tc.set)
		}
	}
}

func TestDeriveName(t *testing.T) {
	t.Parallel()
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:4])
	}
	long := strings.Repeat("d", 80)
	for _, tc := range []struct {
		name                        string
		system, authority, database string
		want                        string
	}{
		{name: "plain: as it is", system: "bullmq", authority: "cache", database: "0", want: "bullmq-cache-0"},
		{name: "a port's ':' is cleaned and hashed", system: "river", authority: "127.0.0.1:5432", database: "reservations",
			want: "river-127.0.0.1-5432-reservations-f021f4f2"},
		{name: "IPv6 brackets: each run is one '-'", system: "jobtable", authority: "[::1]:5432", database: "jobs",
			want: "jobtable--1-5432-jobs-" + hash("jobtable-[::1]:5432-jobs")},
		{name: "an escaped database", system: "river", authority: "db.internal:5432", database: "my%20db",
			want: "river-db.internal-5432-my-20db-" + hash("river-db.internal:5432-my%20db")},
		{name: "long: cut to 63 with the hash", system: "river", authority: "h:5432", database: long,
			want: ("river-h-5432-" + long)[:54] + "-" + hash("river-h:5432-"+long)},
		{name: "long and plain: still hashed", system: "river", authority: "h", database: long,
			want: ("river-h-" + long)[:54] + "-" + hash("river-h-"+long)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := config.DeriveName(tc.system, tc.authority, tc.database)
			if got != tc.want {
				t.Errorf("DeriveName = %q, want %q", got, tc.want)
			}
			if !config.ValidName(got) {
				t.Errorf("DeriveName = %q, which is not a valid name", got)
			}
			if again := config.DeriveName(tc.system, tc.authority, tc.database); again != got {
				t.Errorf("DeriveName is not deterministic: %q, then %q", got, again)
			}
		})
	}
	// The hash tells apart what cleans alike.
	if a, b := config.DeriveName("river", "h:5432", "db"), config.DeriveName("river", "h-5432", "db"); a == b {
		t.Errorf("two servers share the name %q", a)
	}
	if a, b := config.DeriveName("river", "h:5432", long+"1"), config.DeriveName("river", "h:5432", long+"2"); a == b || len(a) != 63 {
		t.Errorf("two long names cut alike: %q, %q", a, b)
	}
}

// TestErrorNamesFileAndLine: an *Error reads FILE:LINE when it has a line.
func TestErrorNamesFileAndLine(t *testing.T) {
	t.Parallel()
	var err error = &config.Error{File: "/x.yaml", Line: 7, Msg: "bad"}
	if err.Error() != "configuration /x.yaml:7: bad" {
		t.Errorf("%q", err)
	}
	err = fmt.Errorf("wrapped: %w", &config.Error{File: "/x.yaml", Msg: "bad"})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Error() != "configuration /x.yaml: bad" {
		t.Errorf("%v", err)
	}
}

// TestEditDistance holds the distance the suggestions of a typo are
// nearest by.
func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"expiry", "expiry", 0},
		{"expirey", "expiry", 1},
		{"expiry", "Expiry", 1},
		{"reservation-expiry", "reservation_expiry", 1},
		{"kitten", "sitting", 3},
		{"", "mail", 4},
		{"mail", "", 4},
		// By runes, not bytes: é is one substitution, not two.
		{"réserve", "reserve", 1},
		{"漢字", "漢", 1},
	} {
		if got := config.EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := config.EditDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d (it is symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}
