package commands

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/store"
)

// NewCmdConfig builds `expiryctl config`.
func NewCmdConfig(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config <command>",
		Short: "Show, switch and write the configuration file: contexts and their connections",
		Long: `The configuration file names, in contexts, the archive (expiryctl's own
PostgreSQL database), the reservation database and every queue system's
connection that expiryctl may dial, with where each one's password comes
from: password-env, password-file, or nothing (libpq's ~/.pgpass and
service file, the AWS profile). A letter records the name of the connection
it was captured from, and every command resolves that name here: a name the
file does not define is refused before anything connects.

The file is --config, else $EXPIRYCTL_CONFIG, else
$XDG_CONFIG_HOME/expiryctl/config.yaml (~/.config/expiryctl/config.yaml).
The context is --context, else $EXPIRYCTL_CONTEXT, else the file's
current-context. docs/configuration.md describes every key.`,
		Example: `  # write a first file from the flags and environment in use
  expiryctl config init
  expiryctl config view
  expiryctl config get-contexts
  expiryctl config use-context staging`,
	}
	cmd.AddCommand(NewCmdConfigView(f, nil), NewCmdConfigGetContexts(f, nil), NewCmdConfigUseContext(f, nil), NewCmdConfigInit(f, nil))
	return cmd
}

// ConfigViewOptions holds what `expiryctl config view` needs.
type ConfigViewOptions struct {
	IO *IOStreams
	// Config reads the file in use; Path says which file that is.
	Config func() (*config.Config, error)
	Path   func() (string, bool)

	Output *outputFormat
}

// NewCmdConfigView builds `expiryctl config view`.
func NewCmdConfigView(f *Factory, runF func(*ConfigViewOptions) error) *cobra.Command {
	opts := &ConfigViewOptions{IO: f.IO, Config: f.Config, Path: f.ConfigPath}
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Show the configuration file in use, passwords hidden",
		Long: `Show the configuration file in use, after a line naming it: every context
and connection as expiryctl read it, with any password inside a URL shown as
xxxxx and where each password comes from ($VARIABLE or a file's path), never
the password itself. The file's comments are not shown.

-o json writes the same as a document: path, current_context and each
context's archive, outcomes and connections (name, system, urls,
management_urls, region, endpoint, profile, password_from, where).

With no file, it says on stderr where one would be read from and prints
nothing.`,
		Example: `  expiryctl config view
  expiryctl config view --config ./staging.yaml
  expiryctl config view -o json | jq '.contexts[].connections[].name'`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return configViewRun(opts)
		},
	}
	opts.Output = addOutputFlag(cmd, "yaml", "json")
	return cmd
}

func configViewRun(opts *ConfigViewOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if cfg.Path == "" {
		noConfigFile(opts.IO, opts.Path)
		return nil
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, configDocument(cfg))
	}
	_, err = opts.IO.Out.Write(config.Render(cfg, cfg.Path))
	return err
}

// noConfigFile says on stderr that no file exists where one would be read.
func noConfigFile(streams *IOStreams, path func() (string, bool)) {
	p, _ := path()
	if p == "" {
		fmt.Fprintln(streams.ErrOut, "no configuration file: neither --config, EXPIRYCTL_CONFIG, XDG_CONFIG_HOME nor HOME names where one would be; "+
			"`expiryctl config init --config PATH` writes one")
		return
	}
	fmt.Fprintf(streams.ErrOut, "no configuration file at %s: `expiryctl config init` writes one from the flags and environment in use\n", p)
}

// configJSON is `config view -o json`: the file as read, no password in it.
type configJSON struct {
	Path           string        `json:"path"`
	CurrentContext string        `json:"current_context"`
	Contexts       []contextJSON `json:"contexts"`
}

type contextJSON struct {
	Name        string           `json:"name"`
	Archive     *connectionJSON  `json:"archive"`
	Outcomes    *connectionJSON  `json:"outcomes"`
	Connections []connectionJSON `json:"connections"`
	Where       string           `json:"where"`
}

// connectionJSON is a connection with its URLs redacted, and where its
// password comes from ($VARIABLE or a file's path) rather than the
// password.
type connectionJSON struct {
	Name           string   `json:"name"`
	System         string   `json:"system"`
	URLs           []string `json:"urls,omitempty"`
	ManagementURLs []string `json:"management_urls,omitempty"`
	Region         string   `json:"region,omitempty"`
	Endpoint       string   `json:"endpoint,omitempty"`
	Profile        string   `json:"profile,omitempty"`
	PasswordFrom   string   `json:"password_from,omitempty"`
	Where          string   `json:"where"`
}

func configDocument(cfg *config.Config) configJSON {
	doc := configJSON{Path: cfg.Path, CurrentContext: cfg.CurrentContext, Contexts: []contextJSON{}}
	for _, x := range cfg.Contexts {
		cx := contextJSON{Name: x.Name, Connections: []connectionJSON{}, Where: x.Where}
		if x.Archive != nil {
			c := connectionDocument(*x.Archive)
			cx.Archive = &c
		}
		if x.Outcomes != nil {
			c := connectionDocument(*x.Outcomes)
			cx.Outcomes = &c
		}
		for _, c := range x.Connections {
			cx.Connections = append(cx.Connections, connectionDocument(c))
		}
		doc.Contexts = append(doc.Contexts, cx)
	}
	return doc
}

func connectionDocument(c config.Connection) connectionJSON {
	return connectionJSON{Name: c.Name, System: c.System, URLs: redactAll(c.URLs), ManagementURLs: redactAll(c.ManagementURLs),
		Region: c.Region, Endpoint: dsn.Redact(c.Endpoint), Profile: c.Profile, PasswordFrom: c.Password.Describe(), Where: c.Where}
}

func redactAll(urls []string) []string {
	if len(urls) == 0 {
		return nil
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = dsn.Redact(u)
	}
	return out
}

// ConfigGetContextsOptions holds what `expiryctl config get-contexts` needs.
type ConfigGetContextsOptions struct {
	IO     *IOStreams
	Config func() (*config.Config, error)
	Path   func() (string, bool)
	// ContextName is the context a command would use: --context, then
	// EXPIRYCTL_CONTEXT, then "" for the file's current-context.
	ContextName func() string

	Output *outputFormat
}

// NewCmdConfigGetContexts builds `expiryctl config get-contexts`.
func NewCmdConfigGetContexts(f *Factory, runF func(*ConfigGetContextsOptions) error) *cobra.Command {
	opts := &ConfigGetContextsOptions{IO: f.IO, Config: f.Config, Path: f.ConfigPath, ContextName: f.ContextName}
	cmd := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the configuration's contexts, marking the one in use",
		Long: `List the configuration file's contexts in its order: a * marks the one
commands use (--context, else EXPIRYCTL_CONTEXT, else the file's
current-context, else the only one), then its name, its archive's URL
(password hidden; - when the context names none, and the flags, the
environment or the default stand in for it) and its connections' names.

-o csv writes one row per context (current, name, archive, connections
space-separated).`,
		Example: `  expiryctl config get-contexts
  expiryctl config get-contexts -o json
  expiryctl config get-contexts -o csv > contexts.csv`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return configGetContextsRun(opts)
		},
	}
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	return cmd
}

// contextRowJSON is one row of `config get-contexts -o json`.
type contextRowJSON struct {
	Current     bool     `json:"current"`
	Name        string   `json:"name"`
	Archive     string   `json:"archive"`
	Connections []string `json:"connections"`
}

var contextCSVHeaders = []string{"current", "name", "archive", "connections"}

func configGetContextsRun(opts *ConfigGetContextsOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if cfg.Path == "" {
		noConfigFile(opts.IO, opts.Path)
	}
	current := ""
	if x, err := cfg.Context(opts.ContextName()); err == nil {
		current = x.Name
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "no context is in use: %v\n", err)
	}
	rows := make([]contextRowJSON, 0, len(cfg.Contexts))
	for _, x := range cfg.Contexts {
		r := contextRowJSON{Current: x.Name == current, Name: x.Name, Connections: x.ConnectionNames()}
		if x.Archive != nil && len(x.Archive.URLs) > 0 {
			r.Archive = dsn.Redact(x.Archive.URLs[0])
		}
		rows = append(rows, r)
	}
	switch opts.Output.value {
	case "json":
		return writeJSON(opts.IO.Out, rows)
	case "csv":
		return writeCSV(opts.IO.Out, contextCSVHeaders, rows, func(r contextRowJSON) []string {
			return []string{fmt.Sprint(r.Current), r.Name, r.Archive, strings.Join(r.Connections, " ")}
		})
	}
	t := newTable(opts.IO, "CURRENT", "NAME", "ARCHIVE", "CONNECTIONS").truncatable("CONNECTIONS", "ARCHIVE")
	for _, r := range rows {
		mark, archive, conns := "", r.Archive, strings.Join(r.Connections, ", ")
		if r.Current {
			mark = "*"
		}
		if archive == "" {
			archive = "-"
		}
		if conns == "" {
			conns = "-"
		}
		t.addRow(mark, r.Name, archive, conns)
	}
	return t.render()
}

// ConfigUseContextOptions holds what `expiryctl config use-context` needs.
type ConfigUseContextOptions struct {
	IO *IOStreams
	// Path is the file whose current-context is set.
	Path func() (string, bool)

	Name string
}

// NewCmdConfigUseContext builds `expiryctl config use-context`.
func NewCmdConfigUseContext(f *Factory, runF func(*ConfigUseContextOptions) error) *cobra.Command {
	opts := &ConfigUseContextOptions{IO: f.IO, Path: f.ConfigPath}
	cmd := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the configuration file's current-context",
		Long: `Set the configuration file's current-context to NAME, one of its contexts,
keeping the rest of the file (its comments and order) as it was. Commands then
use NAME unless --context or EXPIRYCTL_CONTEXT names another.`,
		Example: `  expiryctl config use-context staging
  expiryctl config use-context prod --config /etc/expiryctl/config.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("config use-context takes one context's name, e.g. `expiryctl config use-context staging`; `expiryctl config get-contexts` lists them")
			}
			opts.Name = args[0]
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			cfg, err := f.Config()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
			}
			return cfg.ContextNames(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return configUseContextRun(opts)
		},
	}
	return cmd
}

func configUseContextRun(opts *ConfigUseContextOptions) error {
	path, _ := opts.Path()
	if path == "" {
		return flagErrorf("no configuration file: neither --config, EXPIRYCTL_CONFIG, XDG_CONFIG_HOME nor HOME names one")
	}
	if !fileExists(path) {
		return flagErrorf("no configuration file at %s: `expiryctl config init` writes one", path)
	}
	if err := config.SetCurrentContext(path, opts.Name, connectionRules); err != nil {
		return &FlagError{Err: err}
	}
	fmt.Fprintf(opts.IO.ErrOut, "switched to context %q\n", opts.Name)
	return nil
}

// ConfigInitOptions holds what `expiryctl config init` needs: what the
// flags and the environment give, each "" or nil when they give nothing.
type ConfigInitOptions struct {
	IO *IOStreams
	// Path is the file to write.
	Path func() (string, bool)
	// Getenv reads AWS_REGION, AWS_ENDPOINT_URL_SQS and AWS_PROFILE.
	Getenv func(string) string
	// DatabaseURL is the archive's URL: --database-url, then
	// EXPIRYCTL_DATABASE_URL, then the default; OutcomeURL the
	// reservation database's, "" for none.
	DatabaseURL, OutcomeURL func() string
	// AMQPURLs and ManagementURLs are --amqp-url (EXPIRYCTL_AMQP_URL) and
	// --management-url (EXPIRYCTL_MANAGEMENT_URL), nil when not given.
	AMQPURLs, ManagementURLs func() []string

	// Context names the context written: --context, then
	// EXPIRYCTL_CONTEXT, then "default".
	Context string
	Force   bool
}

// The environment variables a file config init writes takes passwords
// from, for the URLs that held one.
const (
	initArchivePasswordEnv  = "PGPASSWORD"
	initOutcomePasswordEnv  = "EXPIRYCTL_OUTCOME_PASSWORD"
	initRabbitMQPasswordEnv = "EXPIRYCTL_AMQP_PASSWORD"
)

// initHeader is the comment at the top of the file config init writes.
const initHeader = `expiryctl's configuration: contexts naming the archive, the reservation
database and each queue system's connection, and where each password comes
from (password-env, password-file, or libpq's ~/.pgpass). Letters record a
connection's name; a name not defined here is refused before anything
connects. Written by ` + "`expiryctl config init`" + `; docs/configuration.md describes
every key. Keep passwords out of this file.`

// NewCmdConfigInit builds `expiryctl config init`.
func NewCmdConfigInit(f *Factory, runF func(*ConfigInitOptions) error) *cobra.Command {
	opts := &ConfigInitOptions{IO: f.IO, Path: f.ConfigPath, Getenv: f.Getenv,
		DatabaseURL: func() string {
			return firstNonEmpty(f.DatabaseURLFlag, f.Getenv("EXPIRYCTL_DATABASE_URL"), store.DefaultURL)
		},
		OutcomeURL: func() string { return firstNonEmpty(f.OutcomeURLFlag, f.Getenv("EXPIRYCTL_OUTCOME_URL")) },
		AMQPURLs: func() []string {
			return broker.SplitURLs(firstNonEmpty(f.AMQPURLFlag, f.Getenv("EXPIRYCTL_AMQP_URL")))
		},
		ManagementURLs: func() []string {
			return broker.SplitURLs(firstNonEmpty(f.ManagementURLFlag, f.Getenv("EXPIRYCTL_MANAGEMENT_URL")))
		},
	}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a first configuration file from the flags and environment in use",
		Long: `Write a configuration file (mode 0600) at --config, else $EXPIRYCTL_CONFIG,
else $XDG_CONFIG_HOME/expiryctl/config.yaml, with one context (--context,
default "default") made its current-context, holding what the flags and the
environment give now, not what an existing file says:

  archive      --database-url / EXPIRYCTL_DATABASE_URL, else the default
  outcomes     --outcome-url / EXPIRYCTL_OUTCOME_URL, when given
  rabbitmq     --amqp-url / EXPIRYCTL_AMQP_URL and --management-url /
               EXPIRYCTL_MANAGEMENT_URL, when --amqp-url or its variable is given
  sqs          AWS_REGION, AWS_ENDPOINT_URL_SQS and AWS_PROFILE, when the
               region or the endpoint is set

No password is written. A URL that holds one is written without it, with
password-env naming the variable to export instead: PGPASSWORD for the
archive, EXPIRYCTL_OUTCOME_PASSWORD for the reservation database,
EXPIRYCTL_AMQP_PASSWORD for RabbitMQ. An existing file is left as it is
unless --force.`,
		Example: `  # the archive and RabbitMQ this shell reaches, as the context "default"
  EXPIRYCTL_AMQP_URL=amqp://expiry@mq.internal:5672/ expiryctl config init
  # a context of another name, in another file
  expiryctl config init --context staging --config ./staging.yaml \
    --database-url postgres://alice@db.staging:5432/expiryctl
  # write over an existing file
  expiryctl config init --force`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			opts.Context = firstNonEmpty(opts.Context, f.Getenv(config.EnvContext), "default")
			if runF != nil {
				return runF(opts)
			}
			return configInitRun(opts)
		},
	}
	fl := cmd.Flags()
	// Beside the global --context, which picks a context to use, this one
	// names the context to write.
	fl.StringVar(&opts.Context, "context", "", `the name of the context to write (env EXPIRYCTL_CONTEXT; default "default")`)
	fl.BoolVar(&opts.Force, "force", false, "write over an existing file")
	fl.StringVar(&f.OutcomeURLFlag, "outcome-url", "",
		"the reservation database's URL, written as the context's outcomes (env EXPIRYCTL_OUTCOME_URL; default none: expiryctl's own database)")
	return cmd
}

func configInitRun(opts *ConfigInitOptions) error {
	path, _ := opts.Path()
	if path == "" {
		return flagErrorf("no place for the configuration file: neither --config, EXPIRYCTL_CONFIG, XDG_CONFIG_HOME nor HOME names one")
	}
	if !config.ValidName(opts.Context) {
		return flagErrorf("--context %q: a context's name is %s", opts.Context, config.NameRule)
	}
	x := config.Context{Name: opts.Context}
	var notes []string
	c, note, err := initConnection("archive", config.SystemPostgres, []string{opts.DatabaseURL()}, nil,
		"--database-url / EXPIRYCTL_DATABASE_URL", initArchivePasswordEnv)
	if err != nil {
		return err
	}
	x.Archive, notes = &c, appendNote(notes, note)
	if u := opts.OutcomeURL(); u != "" {
		c, note, err := initConnection("outcomes", config.SystemPostgres, []string{u}, nil, "--outcome-url / EXPIRYCTL_OUTCOME_URL", initOutcomePasswordEnv)
		if err != nil {
			return err
		}
		x.Outcomes, notes = &c, appendNote(notes, note)
	}
	if urls := opts.AMQPURLs(); len(urls) > 0 {
		c, note, err := initConnection(implicitRabbitMQ, broker.ConfigRules.System, urls, opts.ManagementURLs(),
			"--amqp-url / EXPIRYCTL_AMQP_URL", initRabbitMQPasswordEnv)
		if err != nil {
			return err
		}
		x.Connections, notes = append(x.Connections, c), appendNote(notes, note)
	}
	for _, b := range registry.Brokers() {
		if c, ok := b.FromEnvironment(opts.Getenv); ok {
			x.Connections = append(x.Connections, c)
		}
	}
	cfg := &config.Config{CurrentContext: x.Name, Contexts: []config.Context{x}}
	data := config.Render(cfg, initHeader)
	// What is written must read back: a URL the rules refuse (one with no
	// login) is said now, naming where it came from, not at the next
	// command.
	back, err := config.Parse(path, data, connectionRules)
	if err != nil {
		return &FlagError{Err: fmt.Errorf("the file config init would write cannot be used, so none was written: %w; "+
			"fix the flag or environment variable it came from", err)}
	}
	for _, c := range back.Contexts[0].Connections {
		if c.InlinePassword() {
			return fmt.Errorf("config init would write a password for %s: none was written", c.Name)
		}
	}
	if err := config.WriteNew(path, data, opts.Force); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(opts.IO.ErrOut, n)
	}
	fmt.Fprintf(opts.IO.ErrOut, "wrote %s\n", path)
	return nil
}

// initConnection is a connection of config init: urls and management
// URLs with any password taken out; when one held a password, the
// connection takes it from passwordEnv, and note says so. from names the
// flag and variable the URLs came from.
func initConnection(name, system string, urls, management []string, from, passwordEnv string) (c config.Connection, note string, err error) {
	c = config.Connection{Name: name, System: system}
	had := false
	for _, u := range urls {
		clean, held, err := withoutPassword(u, from)
		if err != nil {
			return c, "", err
		}
		c.URLs, had = append(c.URLs, clean), had || held
	}
	for _, u := range management {
		clean, held, err := withoutPassword(u, "--management-url / EXPIRYCTL_MANAGEMENT_URL")
		if err != nil {
			return c, "", err
		}
		c.ManagementURLs, had = append(c.ManagementURLs, clean), had || held
	}
	if had {
		c.Password = config.Secret{Env: passwordEnv}
		note = fmt.Sprintf("the password in %s was not written: the file's %s takes it from $%s (password-env); export %s=… before using the file",
			from, name, passwordEnv, passwordEnv)
	}
	return c, note, nil
}

// withoutPassword is raw with its password taken out of the userinfo and
// the query's password and sslpassword, and whether it held one. A URL
// that cannot be read, and might hold one, is an error naming where it
// came from and no part of it.
func withoutPassword(raw, from string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, flagErrorf("the URL of %s cannot be read as a URL (%s): config init writes none; write the file by hand (docs/configuration.md)",
			from, dsn.Redact(raw))
	}
	held := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User, held = url.User(u.User.Username()), true
		}
	}
	q := u.Query()
	if keys := slices.DeleteFunc([]string{"password", "sslpassword"}, func(k string) bool { return !q.Has(k) }); len(keys) > 0 {
		for _, k := range keys {
			q.Del(k)
		}
		u.RawQuery, held = q.Encode(), true
	}
	return u.String(), held, nil
}

func appendNote(notes []string, note string) []string {
	if note == "" {
		return notes
	}
	return append(notes, note)
}

// fileExists says whether something is at path.
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
