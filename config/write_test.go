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

func TestSetCurrentContextKeepsTheRest(t *testing.T) {
	t.Parallel()
	const commented = `# expiryctl's configuration: ask the on-call lead before editing
current-context: prod # the default
contexts:
  # production, read-only logins
  prod:
    archive:
      url: postgres://alice@db.prod:5432/expiryctl # primary
      password-env: ALICE_PGPASSWORD
  staging:
    connections:
      river:
        system: river
        url: postgres://river_reader@db.staging:5432/river
# end of file
`
	for _, tc := range []struct {
		name, text, set string
		mode            os.FileMode
		want            []string // lines the file has after
		wantErr         []string
	}{
		{name: "replaces current-context", text: commented, set: "staging", mode: 0o600,
			want: []string{"# expiryctl's configuration: ask the on-call lead before editing", "current-context: staging # the default",
				"  # production, read-only logins", "      url: postgres://alice@db.prod:5432/expiryctl # primary",
				"      password-env: ALICE_PGPASSWORD", "        url: postgres://river_reader@db.staging:5432/river", "# end of file"}},
		{name: "adds current-context at the top", text: "# mine\ncontexts:\n  a: {}\n  b: {}\n", set: "b", mode: 0o640,
			want: []string{"# mine", "current-context: b", "  a: {}", "  b: {}"}},
		{name: "a quoted value", text: "current-context: \"a\"\ncontexts:\n  a: {}\n  \"1\": {}\n", set: "1", mode: 0o600,
			want: []string{`current-context: "1"`}},
		{name: "an unknown name", text: commented, set: "stagin", mode: 0o600,
			wantErr: []string{`context "stagin" is not in`, `did you mean "staging"?`, "prod, staging"}},
		{name: "no name", text: commented, set: "", mode: 0o600, wantErr: []string{"name a context"}},
		{name: "a file with no contexts", text: "# nothing yet\n", set: "prod", mode: 0o600, wantErr: []string{"names no contexts"}},
		{name: "a file that cannot be used", text: "contexts:\n  a:\n    archive: {url: postgres://h/db}\n", set: "a", mode: 0o600,
			wantErr: []string{"names no login"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "config.yaml", tc.text, tc.mode)
			err := config.SetCurrentContext(path, tc.set, testRules)
			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("SetCurrentContext(%q) succeeded, want an error", tc.set)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q does not say %q", err, w)
					}
				}
				if string(after) != tc.text {
					t.Errorf("a refused change changed the file:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetCurrentContext: %v", err)
			}
			lines := strings.Split(string(after), "\n")
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("the file lost or changed %q:\n%s", w, after)
				}
			}
			cfg, err := config.Load(path, true, testRules)
			if err != nil || cfg.CurrentContext != tc.set {
				t.Fatalf("read back: current-context %q, %v", cfg.CurrentContext, err)
			}
			info, err := os.Stat(path)
			if err != nil || info.Mode().Perm() != tc.mode {
				t.Errorf("mode %v, want %v kept", info.Mode().Perm(), tc.mode)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".config-*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

func TestSetCurrentContextOfAMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	err := config.SetCurrentContext(path, "prod", testRules)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != path || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("err = %v, want an *Error naming the file", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SetCurrentContext made the file: %v", err)
	}
}

func TestRenderRedactsAndReadsBack(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{CurrentContext: "prod", Contexts: []config.Context{
		{Name: "prod",
			Archive:  &config.Connection{Name: "archive", System: config.SystemPostgres, URLs: []string{"postgres://alice:hunter2@db:5432/expiryctl"}},
			Outcomes: &config.Connection{Name: "outcomes", System: config.SystemPostgres, URLs: []string{"postgres://reader@db:5432/res?sslmode=require&password=hunter3"}},
			Connections: []config.Connection{
				{Name: "rabbitmq", System: "rabbitmq", URLs: []string{"amqp://guest:hunter4@n1:5672/", "amqp://guest@n2:5672/"},
					ManagementURLs: []string{"http://guest:hunter5@n1:15672/"}},
				{Name: "river", System: "river", URLs: []string{"postgres://river@db:5432/river"}, Password: config.Secret{File: "/run/secrets/river"}},
				{Name: "redis", System: "bullmq", URLs: []string{"redis://:hunter6@cache:6379/0"}},
				{Name: "sqs", System: "sqs", Region: "eu-west-1", Endpoint: "http://127.0.0.1:4100", Profile: "expiry"},
			}},
		{Name: "empty"},
	}}
	out := string(config.Render(cfg, "expiryctl's configuration.\nSee docs/configuration.md."))
	for _, secret := range []string{"hunter2", "hunter3", "hunter4", "hunter5", "hunter6"} {
		if strings.Contains(out, secret) {
			t.Errorf("Render shows %s:\n%s", secret, out)
		}
	}
	for _, w := range []string{"# expiryctl's configuration.\n# See docs/configuration.md.\ncurrent-context: prod\n",
		"postgres://alice:xxxxx@db:5432/expiryctl", "password=xxxxx", "sslmode=require", "amqp://guest:xxxxx@n1:5672/",
		"password-file: /run/secrets/river", "region: eu-west-1"} {
		if !strings.Contains(out, w) {
			t.Errorf("Render does not write %q:\n%s", w, out)
		}
	}
	back, err := config.Parse("rendered.yaml", []byte(out), testRules)
	if err != nil {
		t.Fatalf("Render's text does not read back: %v\n%s", err, out)
	}
	if got, want := back.ContextNames(), cfg.ContextNames(); !slices.Equal(got, want) || back.CurrentContext != "prod" {
		t.Errorf("read back contexts %v (current %q), want %v", got, back.CurrentContext, want)
	}
	x, _ := back.Context("prod")
	for i, c := range x.Connections {
		w := cfg.Contexts[0].Connections[i]
		if c.Name != w.Name || c.System != w.System || len(c.URLs) != len(w.URLs) || c.Region != w.Region || c.Endpoint != w.Endpoint ||
			c.Profile != w.Profile || c.Password != w.Password {
			t.Errorf("connection %d read back as %+v, want %+v", i, c, w)
		}
	}

	if out := string(config.Render(&config.Config{}, "")); out != "contexts: {}\n" {
		t.Errorf("an empty config renders as %q", out)
	}
}

// TestRenderQuotesWhatYAMLWouldMisread: a value YAML would read as
// another type or cut at a comment is quoted.
func TestRenderQuotesWhatYAMLWouldMisread(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Contexts: []config.Context{{Name: "1", Archive: &config.Connection{Name: "archive", System: config.SystemPostgres,
		URLs: []string{"postgres://a@h/db"}, Password: config.Secret{Env: "true", File: ""}}},
		{Name: "x", Connections: []config.Connection{{Name: "sqs", System: "sqs", Region: "us-east-1", Profile: "a #b"}}}}}
	out := config.Render(cfg, "")
	back, err := config.Parse("r.yaml", out, testRules)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if back.Contexts[0].Name != "1" || back.Contexts[0].Archive.Password.Env != "true" || back.Contexts[1].Connections[0].Profile != "a #b" {
		t.Errorf("read back %+v from\n%s", back, out)
	}
}

func TestWriteNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "made", "expiryctl", "config.yaml")
	if err := config.WriteNew(path, []byte("contexts: {}\n"), false); err != nil {
		t.Fatalf("WriteNew: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", info.Mode().Perm(), err)
	}
	if d, err := os.Stat(filepath.Dir(path)); err != nil || d.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, %v; want 0700", d.Mode().Perm(), err)
	}

	err = config.WriteNew(path, []byte("current-context: x\n"), false)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != path || !strings.Contains(err.Error(), "exists already") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second WriteNew: %v, want a refusal naming the file and --force", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "contexts: {}\n" {
		t.Errorf("a refused WriteNew changed the file: %q", got)
	}

	// --force writes a new file: readable by its owner alone, whatever
	// mode the old one had.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := config.WriteNew(path, []byte("contexts:\n  a: {}\n"), true); err != nil {
		t.Fatalf("forced WriteNew: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "contexts:\n  a: {}\n" {
		t.Errorf("forced WriteNew wrote %q", got)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("forced WriteNew left mode %v, want 0600", info.Mode().Perm())
	}
}
