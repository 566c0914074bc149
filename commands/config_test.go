package commands

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/store"
)

// The secrets planted where the configuration takes passwords from: an
// environment variable, a password-file and a URL in the file itself.
// None may ever be shown.
const (
	plantedEnvSecret    = "env-s3cret-7f3a"
	plantedFileSecret   = "file-s3cret-91bc"
	plantedInlineSecret = "inline-s3cret-c4d2"
	plantedInitSecret   = "init-s3cret-0e5d"
)

var plantedSecrets = []string{plantedEnvSecret, plantedFileSecret, plantedInlineSecret, plantedInitSecret}

// configTestFile is an operator's file with a comment, two contexts and a
// connection of each system, whose passwords come from each kind of
// source; its river password-file is in the same directory.
const configTestFile = `# the on-call team's file
current-context: demo
contexts:
  demo:
    archive:
      url: postgres://alice:` + plantedInlineSecret + `@127.0.0.1:5432/expiryctl_demo
    outcomes:
      url: postgres://reader@127.0.0.1:5432/reservations
      password-env: READER_PGPASSWORD
    connections:
      rabbitmq:
        system: rabbitmq
        url: amqp://guest@127.0.0.1:5672/
        password-env: EXPIRYCTL_AMQP_PASSWORD
      river:
        system: river
        url: postgres://river_reader@127.0.0.1:5432/expiryctl_demo_river
        password-file: river.secret
      redis:
        system: bullmq
        url: redis://127.0.0.1:6379/0
      jobs:
        system: jobtable
        url: postgres://jobs_rw@127.0.0.1:5432/expiryctl_demo_jobs
      sqs:
        system: sqs
        region: us-east-1
        endpoint: http://127.0.0.1:4100
  # staging reads a copy
  staging:
    archive:
      url: postgres://alice@db.staging:5432/expiryctl
`

// configFactory is testFactory with an environment of its own: HOME and
// XDG_CONFIG_HOME in a temporary directory, the planted secrets in the
// variables the file names, and env on top. It returns the directory.
func configFactory(t *testing.T, env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	f, out, errOut := testFactory(t)
	dir := t.TempDir()
	vars := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg"),
		"READER_PGPASSWORD": plantedEnvSecret, "EXPIRYCTL_AMQP_PASSWORD": plantedEnvSecret}
	for k, v := range env {
		vars[k] = v
	}
	f.Getenv = func(k string) string { return vars[k] }
	return f, out, errOut, dir
}

// writeConfigFile writes configTestFile (mode 0600) and its river
// password-file at the default path under dir, and returns its path.
func writeConfigFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "xdg", "expiryctl", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(configTestFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "river.secret"), []byte(plantedFileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runConfig runs expiryctl with args over f, as a person would, and
// fails the test if anything it printed holds a planted secret.
func runConfig(t *testing.T, f *Factory, out, errOut *bytes.Buffer, args ...string) error {
	t.Helper()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	err := root.Execute()
	for _, s := range plantedSecrets {
		for what, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String(), "error": errText(err)} {
			if strings.Contains(text, s) {
				t.Errorf("%s of %v shows the secret %s:\n%s", what, args, s, text)
			}
		}
	}
	return err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestConfigFlags(t *testing.T) {
	t.Parallel()
	t.Run("view", func(t *testing.T) {
		t.Parallel()
		for args, want := range map[string]string{"": "yaml", "-o json": "json", "-o csv": "error"} {
			f, _, _ := testFactory(t)
			var got *ConfigViewOptions
			cmd := NewCmdConfigView(f, func(o *ConfigViewOptions) error { got = o; return nil })
			cmd.SetArgs(strings.Fields(args))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if want == "error" {
				if err == nil || !strings.Contains(err.Error(), "use yaml or json") {
					t.Errorf("%q: err %v, want the formats named", args, err)
				}
				continue
			}
			if err != nil || got.Output.value != want {
				t.Errorf("%q: %v, output %v; want %s", args, err, got, want)
			}
		}
	})
	t.Run("get-contexts", func(t *testing.T) {
		t.Parallel()
		for args, want := range map[string]string{"": "table", "-o json": "json", "-o csv": "csv", "-o yaml": "error"} {
			f, _, _ := testFactory(t)
			var got *ConfigGetContextsOptions
			cmd := NewCmdConfigGetContexts(f, func(o *ConfigGetContextsOptions) error { got = o; return nil })
			cmd.SetArgs(strings.Fields(args))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if want == "error" {
				if err == nil || !strings.Contains(err.Error(), "use table, json or csv") {
					t.Errorf("%q: err %v", args, err)
				}
				continue
			}
			if err != nil || got.Output.value != want {
				t.Errorf("%q: %v, %v; want %s", args, err, got, want)
			}
		}
	})
	t.Run("use-context", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args     []string
			wantName string
		}{
			{args: []string{"staging"}, wantName: "staging"},
			{args: nil},
			{args: []string{"a", "b"}},
		} {
			f, _, _ := testFactory(t)
			var got *ConfigUseContextOptions
			cmd := NewCmdConfigUseContext(f, func(o *ConfigUseContextOptions) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tc.wantName == "" {
				if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), "config get-contexts") {
					t.Errorf("%v: err %v (exit %d), want a usage error", tc.args, err, ExitCode(err))
				}
				continue
			}
			if err != nil || got.Name != tc.wantName {
				t.Errorf("%v: %v, %+v", tc.args, err, got)
			}
		}
	})
	t.Run("init", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args        []string
			env         map[string]string
			wantContext string
			wantForce   bool
		}{
			{wantContext: "default"},
			{args: []string{"--context", "staging", "--force"}, wantContext: "staging", wantForce: true},
			{env: map[string]string{config.EnvContext: "prod"}, wantContext: "prod"},
			{args: []string{"--context", "qa"}, env: map[string]string{config.EnvContext: "prod"}, wantContext: "qa"},
		} {
			f, _, _ := testFactory(t)
			f.Getenv = func(k string) string { return tc.env[k] }
			var got *ConfigInitOptions
			root := NewCmdRoot(f)
			group := findCommand(t, root, "config")
			group.RemoveCommand(findCommand(t, group, "init"))
			group.AddCommand(NewCmdConfigInit(f, func(o *ConfigInitOptions) error { got = o; return nil }))
			root.SetArgs(append([]string{"config", "init"}, tc.args...))
			if err := root.Execute(); err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if got.Context != tc.wantContext || got.Force != tc.wantForce {
				t.Errorf("%v %v: context %q, force %v; want %q, %v", tc.args, tc.env, got.Context, got.Force, tc.wantContext, tc.wantForce)
			}
			if f.ContextFlag != "" {
				t.Errorf("%v: init's --context set the global one to %q", tc.args, f.ContextFlag)
			}
		}
	})
}

func findCommand(t *testing.T, parent *cobra.Command, name string) *cobra.Command {
	t.Helper()
	cmd, _, err := parent.Find([]string{name})
	if err != nil || cmd.Name() != name {
		t.Fatalf("no command %s: %v", name, err)
	}
	return cmd
}

func TestConfigViewWithNoFile(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	if err := runConfig(t, f, out, errOut, "config", "view"); err != nil {
		t.Fatalf("config view: %v", err)
	}
	want := "no configuration file at " + filepath.Join(dir, "xdg", "expiryctl", "config.yaml") + ": `expiryctl config init` writes one"
	if out.Len() != 0 || !strings.Contains(errOut.String(), want) {
		t.Errorf("stdout %q, stderr %q; want nothing and %q", out, errOut, want)
	}

	// A file named by --config or EXPIRYCTL_CONFIG must be there.
	f, out, errOut, dir = configFactory(t, nil)
	err := runConfig(t, f, out, errOut, "config", "view", "--config", filepath.Join(dir, "absent.yaml"))
	if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), "absent.yaml: cannot read it") {
		t.Errorf("err %v (exit %d), want the named file's", err, ExitCode(err))
	}
}

func TestConfigViewHidesPasswords(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	path := writeConfigFile(t, dir)
	if err := runConfig(t, f, out, errOut, "config", "view"); err != nil {
		t.Fatalf("config view: %v", err)
	}
	text := out.String()
	for _, w := range []string{"# " + path + "\n", "current-context: demo\n", "url: postgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo\n",
		"password-env: READER_PGPASSWORD\n", "password-file: " + filepath.Join(filepath.Dir(path), "river.secret") + "\n",
		"      sqs:\n        system: sqs\n        region: us-east-1\n        endpoint: http://127.0.0.1:4100\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("config view does not show %q:\n%s", w, text)
		}
	}
	// What it shows reads back as the same configuration.
	if back, err := config.Parse(path, []byte(text), connectionRules); err != nil ||
		!slices.Equal(back.ContextNames(), []string{"demo", "staging"}) {
		t.Errorf("config view's text does not read back: %v\n%s", err, text)
	}

	out.Reset()
	f, out, errOut, _ = configFactory(t, map[string]string{config.EnvConfig: path})
	if err := runConfig(t, f, out, errOut, "config", "view", "-o", "json"); err != nil {
		t.Fatalf("config view -o json: %v", err)
	}
	var doc configJSON
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Path != path || doc.CurrentContext != "demo" || len(doc.Contexts) != 2 || doc.Contexts[1].Name != "staging" {
		t.Fatalf("document %+v", doc)
	}
	demo := doc.Contexts[0]
	if demo.Archive == nil || demo.Archive.URLs[0] != "postgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo" || demo.Archive.System != "postgres" {
		t.Errorf("archive %+v", demo.Archive)
	}
	if demo.Outcomes == nil || demo.Outcomes.PasswordFrom != "$READER_PGPASSWORD" {
		t.Errorf("outcomes %+v", demo.Outcomes)
	}
	byName := map[string]connectionJSON{}
	for _, c := range demo.Connections {
		byName[c.Name] = c
	}
	if c := byName["rabbitmq"]; c.System != "rabbitmq" || c.PasswordFrom != "$EXPIRYCTL_AMQP_PASSWORD" || c.Where != path+":11" {
		t.Errorf("rabbitmq %+v", c)
	}
	if c := byName["river"]; c.PasswordFrom != filepath.Join(filepath.Dir(path), "river.secret") {
		t.Errorf("river %+v", c)
	}
	if c := byName["sqs"]; c.Region != "us-east-1" || c.Endpoint != "http://127.0.0.1:4100" || c.URLs != nil || c.PasswordFrom != "" {
		t.Errorf("sqs %+v", c)
	}
	if len(demo.Connections) != 5 || demo.Connections[0].Name != "rabbitmq" || demo.Connections[4].Name != "sqs" {
		t.Errorf("connections not in the file's order: %+v", demo.Connections)
	}
}

// TestConfigViewOfAFileThatCannotBeUsed: the error names the file and the
// line, and the password in it stays hidden.
func TestConfigViewOfAFileThatCannotBeUsed(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	path := writeConfigFile(t, dir)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	err := runConfig(t, f, out, errOut, "config", "view")
	if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), path+":5: a URL holds a password") || out.Len() != 0 {
		t.Errorf("err %v (exit %d), stdout %q", err, ExitCode(err), out)
	}
}

func TestConfigGetContexts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // stdout
	}{
		{name: "table", args: []string{"config", "get-contexts"},
			want: "CURRENT\tNAME\tARCHIVE\tCONNECTIONS\n" +
				"*\tdemo\tpostgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo\tjobs, rabbitmq, redis, river, sqs\n" +
				"\tstaging\tpostgres://alice@db.staging:5432/expiryctl\t-\n"},
		{name: "--context marks another", args: []string{"config", "get-contexts", "--context", "staging"},
			want: "CURRENT\tNAME\tARCHIVE\tCONNECTIONS\n" +
				"\tdemo\tpostgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo\tjobs, rabbitmq, redis, river, sqs\n" +
				"*\tstaging\tpostgres://alice@db.staging:5432/expiryctl\t-\n"},
		{name: "EXPIRYCTL_CONTEXT marks another", args: []string{"config", "get-contexts", "-o", "csv"}, env: map[string]string{config.EnvContext: "staging"},
			want: "current,name,archive,connections\n" +
				"false,demo,postgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo,jobs rabbitmq redis river sqs\n" +
				"true,staging,postgres://alice@db.staging:5432/expiryctl,\n"},
		{name: "json", args: []string{"config", "get-contexts", "-o", "json"},
			want: `[
  {
    "current": true,
    "name": "demo",
    "archive": "postgres://alice:xxxxx@127.0.0.1:5432/expiryctl_demo",
    "connections": [
      "jobs",
      "rabbitmq",
      "redis",
      "river",
      "sqs"
    ]
  },
  {
    "current": false,
    "name": "staging",
    "archive": "postgres://alice@db.staging:5432/expiryctl",
    "connections": []
  }
]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, out, errOut, dir := configFactory(t, tc.env)
			writeConfigFile(t, dir)
			if err := runConfig(t, f, out, errOut, tc.args...); err != nil {
				t.Fatalf("%v", err)
			}
			if out.String() != tc.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, tc.want)
			}
			if strings.HasSuffix(tc.name, "csv") {
				if _, err := csv.NewReader(strings.NewReader(out.String())).ReadAll(); err != nil {
					t.Errorf("not CSV: %v", err)
				}
			}
		})
	}

	// No file: a header and a note; an unknown --context: a note, no mark.
	f, out, errOut, _ := configFactory(t, nil)
	if err := runConfig(t, f, out, errOut, "config", "get-contexts"); err != nil || out.String() != "CURRENT\tNAME\tARCHIVE\tCONNECTIONS\n" ||
		!strings.Contains(errOut.String(), "no configuration file at") {
		t.Errorf("no file: %v, stdout %q, stderr %q", err, out, errOut)
	}
	f, out, errOut, dir := configFactory(t, nil)
	writeConfigFile(t, dir)
	if err := runConfig(t, f, out, errOut, "config", "get-contexts", "--context", "stagin"); err != nil || strings.Contains(out.String(), "*") ||
		!strings.Contains(errOut.String(), `did you mean "staging"?`) {
		t.Errorf("unknown --context: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

func TestConfigUseContext(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	path := writeConfigFile(t, dir)
	if err := runConfig(t, f, out, errOut, "config", "use-context", "staging"); err != nil {
		t.Fatalf("use-context: %v", err)
	}
	if out.Len() != 0 || errOut.String() != "switched to context \"staging\"\n" {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"# the on-call team's file\ncurrent-context: staging\n", "  # staging reads a copy\n",
		"url: postgres://alice:" + plantedInlineSecret + "@127.0.0.1:5432/expiryctl_demo"} {
		if !strings.Contains(string(after), w) {
			t.Errorf("the file lost %q:\n%s", w, after)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", info.Mode().Perm(), err)
	}

	// The next command uses it.
	f, out, errOut, _ = configFactory(t, map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg")})
	if x, err := f.Context(); err != nil || x.Name != "staging" {
		t.Errorf("Context() = %+v, %v", x, err)
	}

	// An unknown name names the known ones and changes nothing.
	err = runConfig(t, f, out, errOut, "config", "use-context", "prd")
	if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), `context "prd" is not in `+path) || !strings.Contains(errText(err), "demo, staging") {
		t.Errorf("unknown name: %v (exit %d)", err, ExitCode(err))
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
		t.Errorf("a refused use-context changed the file")
	}

	// No file: say how to write one.
	f, out, errOut, _ = configFactory(t, nil)
	err = runConfig(t, f, out, errOut, "config", "use-context", "staging")
	if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), "expiryctl config init") {
		t.Errorf("no file: %v", err)
	}
}

func TestConfigUseContextCompletesTheFilesContexts(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	writeConfigFile(t, dir)
	if err := runConfig(t, f, out, errOut, "__complete", "config", "use-context", ""); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(out.String(), "\n"); len(lines) < 3 || lines[0] != "demo" || lines[1] != "staging" || !strings.HasPrefix(lines[2], ":") {
		t.Errorf("completion %q, want demo and staging", out)
	}
}

func TestConfigInitWritesNoSecret(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"EXPIRYCTL_DATABASE_URL":   "postgres://alice:" + plantedInitSecret + "@db.internal:5432/expiryctl?sslmode=require",
		"EXPIRYCTL_OUTCOME_URL":    "postgres://reader@db.internal:5432/reservations?password=" + plantedInitSecret,
		"EXPIRYCTL_AMQP_URL":       "amqp://expiry:" + plantedInitSecret + "@mq1:5672/,amqp://expiry:" + plantedInitSecret + "@mq2:5672/",
		"EXPIRYCTL_MANAGEMENT_URL": "http://expiry:" + plantedInitSecret + "@mq1:15672/",
		"AWS_REGION":               "eu-west-1", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4100", "AWS_PROFILE": "expiry",
	}
	f, out, errOut, dir := configFactory(t, env)
	path := filepath.Join(dir, "xdg", "expiryctl", "config.yaml")
	if err := runConfig(t, f, out, errOut, "config", "init"); err != nil {
		t.Fatalf("config init: %v", err)
	}
	if out.Len() != 0 || !strings.HasSuffix(errOut.String(), "wrote "+path+"\n") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
	for _, w := range []string{"export PGPASSWORD=", "export EXPIRYCTL_OUTCOME_PASSWORD=", "export EXPIRYCTL_AMQP_PASSWORD="} {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("stderr does not say %q: %s", w, errOut)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), plantedInitSecret) || strings.Contains(string(raw), "xxxxx") {
		t.Fatalf("config init wrote a password, or a placeholder for one:\n%s", raw)
	}
	if !strings.HasPrefix(string(raw), "# expiryctl's configuration") || !strings.Contains(string(raw), "docs/configuration.md") {
		t.Errorf("no header:\n%s", raw)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", info.Mode().Perm(), err)
	}
	cfg, err := config.Load(path, true, connectionRules)
	if err != nil {
		t.Fatalf("the written file does not load: %v\n%s", err, raw)
	}
	x, err := cfg.Context("")
	if err != nil || cfg.CurrentContext != "default" || x.Name != "default" {
		t.Fatalf("context %+v, %v", x, err)
	}
	if a := x.Archive; a == nil || a.URLs[0] != "postgres://alice@db.internal:5432/expiryctl?sslmode=require" || a.Password.Env != "PGPASSWORD" {
		t.Errorf("archive %+v", a)
	}
	if o := x.Outcomes; o == nil || o.URLs[0] != "postgres://reader@db.internal:5432/reservations" || o.Password.Env != "EXPIRYCTL_OUTCOME_PASSWORD" {
		t.Errorf("outcomes %+v", o)
	}
	mq, ok := x.Connection("rabbitmq")
	if !ok || !slices.Equal(mq.URLs, []string{"amqp://expiry@mq1:5672/", "amqp://expiry@mq2:5672/"}) ||
		!slices.Equal(mq.ManagementURLs, []string{"http://expiry@mq1:15672/"}) || mq.Password.Env != "EXPIRYCTL_AMQP_PASSWORD" {
		t.Errorf("rabbitmq %+v", mq)
	}
	if sqs, ok := x.Connection("sqs"); !ok || sqs.Region != "eu-west-1" || sqs.Endpoint != "http://127.0.0.1:4100" || sqs.Profile != "expiry" {
		t.Errorf("sqs %+v", sqs)
	}

	// A command that reads the file reaches the same servers, with the
	// password from the variable it was told to export.
	g, _, _, _ := configFactory(t, map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg"), "PGPASSWORD": plantedInitSecret,
		"EXPIRYCTL_AMQP_PASSWORD": plantedInitSecret})
	if got := g.DatabaseURL(); got != env["EXPIRYCTL_DATABASE_URL"] {
		t.Errorf("DatabaseURL() after init = %q, want the URL init was given", got)
	}
	if got := g.AMQPURLs(); !slices.Equal(got, strings.Split(env["EXPIRYCTL_AMQP_URL"], ",")) {
		t.Errorf("AMQPURLs() after init = %q", got)
	}

	// An existing file is kept unless --force.
	out.Reset()
	errOut.Reset()
	err = runConfig(t, f, out, errOut, "config", "init")
	if err == nil || !strings.Contains(err.Error(), path+": exists already") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second init: %v", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, raw) {
		t.Error("a refused init changed the file")
	}
	f, out, errOut, _ = configFactory(t, map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "xdg")})
	if err := runConfig(t, f, out, errOut, "config", "init", "--force", "--context", "fresh"); err != nil {
		t.Fatalf("init --force: %v", err)
	}
	if cfg, err := config.Load(path, true, connectionRules); err != nil || cfg.CurrentContext != "fresh" || len(cfg.Contexts) != 1 {
		t.Errorf("after --force: %+v, %v", cfg, err)
	}
}

func TestConfigInitFromNothing(t *testing.T) {
	t.Parallel()
	f, out, errOut, dir := configFactory(t, nil)
	path := filepath.Join(dir, "other", "staging.yaml")
	if err := runConfig(t, f, out, errOut, "config", "init", "--config", path, "--context", "staging"); err != nil {
		t.Fatalf("config init: %v", err)
	}
	if errOut.String() != "wrote "+path+"\n" {
		t.Errorf("stderr %q: no password, so no note", errOut)
	}
	cfg, err := config.Load(path, true, connectionRules)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := cfg.Context("")
	if x.Name != "staging" || x.Archive == nil || x.Archive.URLs[0] != store.DefaultURL || x.Archive.Password.Set() || x.Outcomes != nil ||
		len(x.Connections) != 0 {
		t.Errorf("context %+v (archive %+v)", x, x.Archive)
	}
}

func TestConfigInitRefusesWhatCannotBeUsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "an AMQP URL with no login", env: map[string]string{"EXPIRYCTL_AMQP_URL": "amqp://mq1:5672/"},
			want: "never logs in as the operating system's user"},
		{name: "a database URL with no login", args: []string{"--database-url", "postgres://db:5432/expiryctl"},
			want: "never logs in as the operating system's user"},
		{name: "a URL that is not one", env: map[string]string{"EXPIRYCTL_DATABASE_URL": "postgres://alice:" + plantedInitSecret + "@db:notaport/x"},
			want: "cannot be read as a URL"},
		{name: "a bad region", env: map[string]string{"AWS_REGION": "Europe"}, want: `region "Europe"`},
		{name: "a bad context name", args: []string{"--context", "my context"}, want: `--context "my context": a context's name is`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, out, errOut, dir := configFactory(t, tc.env)
			err := runConfig(t, f, out, errOut, append([]string{"config", "init"}, tc.args...)...)
			if ExitCode(err) != ExitUsage || !strings.Contains(errText(err), tc.want) {
				t.Errorf("err %v (exit %d), want a usage error saying %q", err, ExitCode(err), tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "xdg", "expiryctl", "config.yaml")); !os.IsNotExist(err) {
				t.Errorf("a refused init wrote a file: %v", err)
			}
		})
	}
}
