package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
)

// demoFile is the example of docs/configuration.md, with a relative
// password-file beside the ~/ one.
const demoFile = `# the operator's file
current-context: demo
contexts:
  demo:
    archive:
      url: postgres://alice@127.0.0.1:5432/expiryctl_demo
      password-env: ALICE_PGPASSWORD
    outcomes:
      url: postgres://reader@127.0.0.1:5432/reservations
    connections:
      rabbitmq:
        system: rabbitmq
        urls:
          - amqp://guest@10.0.0.1:5672/
          - amqp://guest@10.0.0.2:5672/
        management-url: http://10.0.0.1:15672/
        password-env: EXPIRYCTL_AMQP_PASSWORD
      river:
        system: river
        url: postgres://river_reader@127.0.0.1:5432/expiryctl_demo_river
        password-file: ~/.secrets/river
      redis:
        system: bullmq
        url: redis://127.0.0.1:6379/0
      jobs:
        system: jobtable
        url: postgres://jobs_rw@127.0.0.1:5432/expiryctl_demo_jobs
        password-file: secrets/jobs
      sqs:
        system: sqs
        region: us-east-1
        endpoint: http://127.0.0.1:4100
        profile: expiry
  empty:
`

func TestLoadReadsAGoodFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "config.yaml", demoFile, 0o644)
	cfg, err := config.Load(path, true, testRules)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Path != path || cfg.CurrentContext != "demo" {
		t.Errorf("Path %q, CurrentContext %q", cfg.Path, cfg.CurrentContext)
	}
	if got := strings.Join(cfg.ContextNames(), ","); got != "demo,empty" {
		t.Errorf("contexts %s, want the file's order", got)
	}
	x, err := cfg.Context("")
	if err != nil {
		t.Fatal(err)
	}
	if x.Where != path+":4" {
		t.Errorf("demo's Where = %q", x.Where)
	}
	if a := x.Archive; a == nil || a.Name != "archive" || a.System != config.SystemPostgres ||
		!slices.Equal(a.URLs, []string{"postgres://alice@127.0.0.1:5432/expiryctl_demo"}) || a.Password.Env != "ALICE_PGPASSWORD" ||
		a.Where != path+":5" {
		t.Errorf("archive = %+v", a)
	}
	if o := x.Outcomes; o == nil || o.URLs[0] != "postgres://reader@127.0.0.1:5432/reservations" || o.Password.Set() {
		t.Errorf("outcomes = %+v", o)
	}
	var names []string
	for _, c := range x.Connections {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "rabbitmq,river,redis,jobs,sqs" {
		t.Errorf("connections %s, want the file's order", got)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]config.Connection{
		"rabbitmq": {System: "rabbitmq", URLs: []string{"amqp://guest@10.0.0.1:5672/", "amqp://guest@10.0.0.2:5672/"},
			ManagementURLs: []string{"http://10.0.0.1:15672/"}, Password: config.Secret{Env: "EXPIRYCTL_AMQP_PASSWORD"}, Where: path + ":11"},
		"river": {System: "river", URLs: []string{"postgres://river_reader@127.0.0.1:5432/expiryctl_demo_river"},
			Password: config.Secret{File: filepath.Join(home, ".secrets", "river")}, Where: path + ":18"},
		"redis": {System: "bullmq", URLs: []string{"redis://127.0.0.1:6379/0"}, Where: path + ":22"},
		"jobs": {System: "jobtable", URLs: []string{"postgres://jobs_rw@127.0.0.1:5432/expiryctl_demo_jobs"},
			Password: config.Secret{File: filepath.Join(filepath.Dir(path), "secrets", "jobs")}, Where: path + ":25"},
		"sqs": {System: "sqs", Region: "us-east-1", Endpoint: "http://127.0.0.1:4100", Profile: "expiry", Where: path + ":29"},
	}
	for name, w := range want {
		got, ok := x.Connection(name)
		w.Name = name
		if !ok || got.System != w.System || !slices.Equal(got.URLs, w.URLs) || !slices.Equal(got.ManagementURLs, w.ManagementURLs) ||
			got.Region != w.Region || got.Endpoint != w.Endpoint || got.Profile != w.Profile || got.Password != w.Password || got.Where != w.Where {
			t.Errorf("connection %s:\n got %+v\nwant %+v", name, got, w)
		}
	}
	empty, err := cfg.Context("empty")
	if err != nil || empty.Archive != nil || len(empty.Connections) != 0 {
		t.Errorf("empty context = %+v, %v", empty, err)
	}
}

// TestLoadRefusesBadInput: every problem is an *Error naming the file and
// the line a person fixes.
func TestLoadRefusesBadInput(t *testing.T) {
	t.Parallel()
	// conn wraps one connection's lines (indented 8) into a context.
	conn := func(lines string) string {
		return "contexts:\n  demo:\n    connections:\n" + lines
	}
	for _, tc := range []struct {
		name string
		text string
		line int
		want []string
	}{
		{name: "not YAML", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a@h/db: x\n", line: 4,
			want: []string{"not YAML: mapping values are not allowed"}},
		{name: "not a mapping", text: "- a\n- b\n", line: 1, want: []string{"the file must be a mapping"}},
		{name: "unknown top key", text: "current-context: demo\ncontext:\n  demo: {}\n", line: 2,
			want: []string{`the file takes no key "context"`, `did you mean "contexts"?`, "current-context, contexts"}},
		{name: "unknown context key", text: "contexts:\n  demo:\n    archives: {url: postgres://a@h/db}\n", line: 3,
			want: []string{`context "demo" takes no key "archives"`, `did you mean "archive"?`}},
		{name: "unknown connection key", text: conn("      river:\n        system: river\n        urll: postgres://r@h:5432/db\n"), line: 6,
			want: []string{`connection "river" takes no key "urll"`, `did you mean "url"?`}},
		{name: "a key of another system", text: conn("      river:\n        system: river\n        url: postgres://r@h:5432/db\n        region: us-east-1\n"), line: 7,
			want: []string{`connection "river" takes no key "region"`}},
		{name: "unknown system", text: conn("      mq:\n        system: rabbitmg\n        url: amqp://g@h:5672/\n"), line: 5,
			want: []string{`system "rabbitmg" is not one expiryctl reaches`, `did you mean "rabbitmq"?`, "rabbitmq, river, bullmq, jobtable, sqs"}},
		{name: "the archive's system is not a connection's", text: conn("      pg:\n        system: postgres\n        url: postgres://a@h/db\n"), line: 5,
			want: []string{`system "postgres" is not one expiryctl reaches`}},
		{name: "a key given twice", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a@h/db\n      url: postgres://b@h/db\n", line: 5,
			want: []string{`archive has "url" twice: keep one`}},
		{name: "missing system", text: conn("      mq:\n        url: amqp://g@h:5672/\n"), line: 4,
			want: []string{`connection "mq" names no system`, "add system:"}},
		{name: "url and urls", text: conn("      mq:\n        system: rabbitmq\n        url: amqp://g@h:5672/\n        urls: [amqp://g@h2:5672/]\n"), line: 7,
			want: []string{"has both url and urls: keep one"}},
		{name: "password-env and password-file", text: conn("      mq:\n        system: rabbitmq\n        url: amqp://g@h:5672/\n        password-env: X\n        password-file: /x\n"), line: 8,
			want: []string{"has both password-env and password-file"}},
		{name: "URL password and password-env", text: conn("      river:\n        system: river\n        url: postgres://r:hunter2@h:5432/db\n        password-env: RIVER_PW\n"), line: 7,
			want: []string{`connection "river" has a password in its URL and a password-env too: keep one`}},
		{name: "URL password parameter and password-file", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a@h/db?password=hunter2\n      password-file: /x\n", line: 5,
			want: []string{"archive has a password in its URL and a password-file too"}},
		{name: "invalid context name", text: "contexts:\n  demo:\n  bad name: {}\n", line: 3,
			want: []string{`context "bad name": a context's name is 1 to 63 letters`}},
		{name: "invalid connection name", text: conn("      my:mq:\n        system: rabbitmq\n        url: amqp://g@h:5672/\n"), line: 4,
			want: []string{`connection "my:mq": a connection's name is 1 to 63`}},
		{name: "a connection named twice", text: conn("      river:\n        system: river\n        url: postgres://r@h:5432/a\n      river:\n        system: river\n        url: postgres://r@h:5432/b\n"), line: 7,
			want: []string{`"river" twice`}},
		{name: "a context named twice", text: "contexts:\n  demo: {}\n  demo: {}\n", line: 3, want: []string{`"demo" twice`}},
		{name: "current-context names no context", text: "current-context: prd\ncontexts:\n  prod: {}\n", line: 1,
			want: []string{`current-context "prd" names no context of the file`, `did you mean "prod"?`}},
		{name: "a list where one value goes", text: "contexts:\n  demo:\n    archive:\n      url: [postgres://a@h/db]\n", line: 4,
			want: []string{"url must be a single value"}},
		{name: "archive without login", text: "contexts:\n  demo:\n    archive:\n      url: postgres://127.0.0.1:5432/expiryctl\n", line: 3,
			want: []string{"archive: url postgres://127.0.0.1:5432/expiryctl names no login", "never logs in as the operating system's user",
				"postgres://USER@127.0.0.1:5432/expiryctl"}},
		{name: "outcomes without login", text: "contexts:\n  demo:\n    outcomes:\n      url: postgres://h/reservations\n", line: 3,
			want: []string{"outcomes: url", "never logs in as the operating system's user"}},
		{name: "river without login", text: conn("      river:\n        system: river\n        url: postgres://127.0.0.1:5432/db\n"), line: 4,
			want: []string{`connection "river": url postgres://127.0.0.1:5432/db names no login`, "never logs in as the operating system's user"}},
		{name: "jobtable without login", text: conn("      jobs:\n        system: jobtable\n        url: postgresql://h:5432/db\n"), line: 4,
			want: []string{`connection "jobs"`, "never logs in as the operating system's user"}},
		{name: "rabbitmq without login", text: conn("      mq:\n        system: rabbitmq\n        urls:\n          - amqp://g@h1:5672/\n          - amqp://h2:5672/\n"), line: 4,
			want: []string{`connection "mq": url amqp://h2:5672/ names no login`, "never logs in as the operating system's user"}},
		{name: "a URL of another scheme", text: conn("      river:\n        system: river\n        url: mysql://u@h/db\n"), line: 4,
			want: []string{`url "mysql://u@h/db" is not a postgres:// URL with a host`}},
		{name: "no url", text: conn("      river:\n        system: river\n        password-env: X\n"), line: 4,
			want: []string{"no url: add url: postgres://USER@HOST:PORT/"}},
		{name: "bad SQS region", text: conn("      sqs:\n        system: sqs\n        region: US East\n"), line: 4,
			want: []string{`connection "sqs": region "US East" is not an AWS region's name`}},
		{name: "bad SQS endpoint", text: conn("      sqs:\n        system: sqs\n        region: us-east-1\n        endpoint: 127.0.0.1:4100\n"), line: 4,
			want: []string{`endpoint "127.0.0.1:4100" is not an http:// or https:// URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "config.yaml", tc.text, 0o600)
			cfg, err := config.Load(path, true, testRules)
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load = %+v, %v; want a *config.Error", cfg, err)
			}
			if ce.File != path || ce.Line != tc.line {
				t.Errorf("error at %s:%d, want %s:%d (%v)", ce.File, ce.Line, path, tc.line, err)
			}
			if !strings.HasPrefix(err.Error(), "configuration "+path+":") {
				t.Errorf("%q does not begin with the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%q shows the password", err)
			}
		})
	}
}

// TestLoadRefusesAPasswordOthersCanRead: a password in a URL is accepted
// only in a file that its owner alone can read.
func TestLoadRefusesAPasswordOthersCanRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		text    string
		mode    os.FileMode
		line    int // 0: accepted
		wantMsg string
	}{
		{name: "userinfo, 0644", text: "contexts:\n  demo:\n    connections:\n      mq:\n        system: rabbitmq\n        url: amqp://g:hunter2@h:5672/\n",
			mode: 0o644, line: 4, wantMsg: "mode 0644 lets others read it: run `chmod 600"},
		{name: "userinfo, 0640", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a:hunter2@h/db\n", mode: 0o640, line: 3},
		{name: "password parameter, 0644", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a@h/db?sslmode=disable&password=hunter2\n", mode: 0o644, line: 3},
		{name: "management URL, 0604", text: "contexts:\n  demo:\n    connections:\n      mq:\n        system: rabbitmq\n        url: amqp://g@h:5672/\n        management-url: http://g:hunter2@h:15672/\n",
			mode: 0o604, line: 4},
		{name: "userinfo, 0600", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a:hunter2@h/db\n", mode: 0o600},
		{name: "userinfo, 0400", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a:hunter2@h/db\n", mode: 0o400},
		{name: "no password, 0644", text: "contexts:\n  demo:\n    archive:\n      url: postgres://a@h/db\n      password-env: PGPASSWORD\n", mode: 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "config.yaml", tc.text, tc.mode)
			_, err := config.Load(path, false, testRules)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Line != tc.line {
				t.Fatalf("Load = %v, want an *Error at line %d", err, tc.line)
			}
			if !strings.Contains(err.Error(), firstNonEmpty(tc.wantMsg, "lets others read it")) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%q", err)
			}
		})
	}
	// Parse reads text, not a file: it has no mode to check.
	if _, err := config.Parse("x.yaml", []byte("contexts:\n  demo:\n    archive:\n      url: postgres://a:hunter2@h/db\n"), testRules); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// TestLoadRefusesAFileOthersCanWrite: whoever writes the file decides
// which server a connection's name reaches, so a file its group or the
// world may write is refused, as ssh refuses such a configuration.
func TestLoadRefusesAFileOthersCanWrite(t *testing.T) {
	t.Parallel()
	const text = "contexts:\n  demo:\n    connections:\n      mq:\n        system: rabbitmq\n        url: amqp://g@h:5672/\n"
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o644, true}, {0o664, false}, {0o646, false}, {0o666, false}} {
		path := writeFile(t, "config.yaml", text, c.mode)
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path, true, testRules)
		var ce *config.Error
		switch {
		case c.ok && err != nil:
			t.Errorf("mode %04o: %v, want read", c.mode, err)
		case !c.ok && (!errors.As(err, &ce) || !strings.Contains(err.Error(), "lets others write it")):
			t.Errorf("mode %04o: %v, want refused as writable by others", c.mode, err)
		}
	}
}

func TestLoadMissingAndEmptyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "config.yaml")

	cfg, err := config.Load(missing, false, testRules)
	if err != nil || cfg.Path != "" || len(cfg.Contexts) != 0 {
		t.Errorf("missing default: %+v, %v; want an empty config with no path", cfg, err)
	}
	if x, err := cfg.Context(""); err != nil || x.Name != "" || x.Archive != nil {
		t.Errorf("missing default's context: %+v, %v", x, err)
	}

	_, err = config.Load(missing, true, testRules)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != missing || !strings.Contains(err.Error(), "cannot read it: no such file") {
		t.Errorf("missing named file: %v, want an *Error naming it", err)
	}

	if cfg, err := config.Load("", false, testRules); err != nil || len(cfg.Contexts) != 0 {
		t.Errorf("no path: %+v, %v", cfg, err)
	}

	for _, text := range []string{"", "# only a comment\n", "~\n", "contexts: {}\n", "contexts:\n  demo:\n    connections:\n"} {
		path := writeFile(t, "config.yaml", text, 0o600)
		cfg, err := config.Load(path, true, testRules)
		if err != nil || cfg.Path != path || cfg.CurrentContext != "" {
			t.Errorf("%q: %+v, %v", text, cfg, err)
		}
	}
}

func TestLocate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		flag         string
		env          map[string]string
		want         string
		wantExplicit bool
	}{
		{name: "flag first", flag: "/f.yaml", env: map[string]string{config.EnvConfig: "/e.yaml", "XDG_CONFIG_HOME": "/xdg"}, want: "/f.yaml", wantExplicit: true},
		{name: "then the environment", env: map[string]string{config.EnvConfig: "/e.yaml", "XDG_CONFIG_HOME": "/xdg"}, want: "/e.yaml", wantExplicit: true},
		{name: "then XDG_CONFIG_HOME", env: map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/a"}, want: "/xdg/expiryctl/config.yaml"},
		{name: "a relative XDG_CONFIG_HOME is ignored", env: map[string]string{"XDG_CONFIG_HOME": "xdg", "HOME": "/home/a"}, want: "/home/a/.config/expiryctl/config.yaml"},
		{name: "then HOME", env: map[string]string{"HOME": "/home/a"}, want: "/home/a/.config/expiryctl/config.yaml"},
		{name: "no HOME: no default file", env: map[string]string{}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, explicit := config.Locate(tc.flag, func(k string) string { return tc.env[k] })
			if got != tc.want || explicit != tc.wantExplicit {
				t.Errorf("Locate = %q, %v; want %q, %v", got, explicit, tc.want, tc.wantExplicit)
			}
		})
	}
}
