package commands

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/replay"
)

// connectionRules are what a connection of each system takes in the
// configuration file: each driver's.
var connectionRules = registry.ConfigRules()

// Config reads the configuration file once: --config, then
// EXPIRYCTL_CONFIG, then $XDG_CONFIG_HOME/expiryctl/config.yaml. No file
// at the default path is an empty configuration; a file that cannot be
// used is an error of every command that connects, which then connects
// to nothing.
func (f *Factory) Config() (*config.Config, error) {
	f.configOnce.Do(func() {
		path, explicit := config.Locate(f.ConfigFlag, f.Getenv)
		f.config, f.configErr = config.Load(path, explicit, connectionRules)
		if f.configErr != nil {
			f.configErr = &FlagError{Err: f.configErr}
		}
	})
	return f.config, f.configErr
}

// ConfigPath is the file Config reads, and whether a flag or the
// environment named it.
func (f *Factory) ConfigPath() (string, bool) { return config.Locate(f.ConfigFlag, f.Getenv) }

// ContextName is the context a command uses: --context, then
// EXPIRYCTL_CONTEXT, then the file's current-context ("" for that).
func (f *Factory) ContextName() string {
	return firstNonEmpty(f.ContextFlag, f.Getenv(config.EnvContext))
}

// Context is the context a command uses. With no file, or a file with
// no contexts, it is empty: the flags, the environment and the defaults
// stand in for it.
func (f *Factory) Context() (*config.Context, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	x, err := cfg.Context(f.ContextName())
	if err != nil {
		return nil, &FlagError{Err: err}
	}
	return x, nil
}

// implicitRabbitMQ is what the connection the flags and the environment
// reach is called when the context names none of RabbitMQ's, and what
// letters captured before connections had names record; a driver.Broker's
// is its Traits.DefaultConnection.
const implicitRabbitMQ = "rabbitmq"

// implicitConnection is the name of the connection the flags and the
// environment stand in for, for a publishing system: what a target that
// names none went through.
func implicitConnection(system deadletter.System) string {
	if b, ok := brokerFor(system); ok {
		return b.Traits().DefaultConnection
	}
	return implicitRabbitMQ
}

// onlyOfSystem is the context's one connection of system, or an implicit
// one called implicitName (ok false) when it has none. A context with
// several is refused, naming them: which one a command means is not
// guessed.
func onlyOfSystem(x *config.Context, system deadletter.System, implicitName string) (config.Connection, bool, error) {
	conns := x.OfSystem(string(system))
	switch len(conns) {
	case 0:
		return config.Connection{Name: implicitName, System: string(system)}, false, nil
	case 1:
		return conns[0], true, nil
	}
	names := make([]string, len(conns))
	for i, c := range conns {
		names[i] = c.Name
	}
	return config.Connection{}, false, &FlagError{Err: fmt.Errorf("context %q defines %d %s connections (%s): this expiryctl reaches one a context; "+
		"give each its own context and pick it with --context", x.Name, len(conns), system, strings.Join(names, ", "))}
}

// withPassword is raw with password set in its userinfo, for a URL whose
// password comes from a secret; raw as it is when password is empty or
// the URL cannot be read.
func withPassword(raw, password string) string {
	if password == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

// secretOf resolves where c's password comes from.
func (f *Factory) secretOf(c config.Connection) (string, error) {
	p, err := c.Password.Resolve(c.Name, f.Getenv)
	if err != nil {
		return "", &FlagError{Err: err}
	}
	return p, nil
}

// RabbitMQConnection is the RabbitMQ connection a command reaches: its
// name, which letters record, and its nodes' URLs and management URLs
// with their passwords, by --amqp-url and --management-url, then
// EXPIRYCTL_AMQP_URL and EXPIRYCTL_MANAGEMENT_URL, then the context's
// RabbitMQ connection, then the default broker.
func (f *Factory) RabbitMQConnection() (config.Connection, error) {
	x, err := f.Context()
	if err != nil {
		return config.Connection{}, err
	}
	c, configured, err := onlyOfSystem(x, deadletter.RabbitMQ, implicitRabbitMQ)
	if err != nil {
		return config.Connection{}, err
	}
	if urls := broker.SplitURLs(firstNonEmpty(f.AMQPURLFlag, f.Getenv("EXPIRYCTL_AMQP_URL"))); len(urls) > 0 {
		c.URLs, c.Where = urls, "--amqp-url / EXPIRYCTL_AMQP_URL"
		c.Password = config.Secret{}
	} else if configured {
		password, err := f.secretOf(c)
		if err != nil {
			return config.Connection{}, err
		}
		urls := make([]string, len(c.URLs))
		for i, u := range c.URLs {
			urls[i] = withPassword(u, password)
		}
		c.URLs = urls
	} else {
		c.URLs, c.Where = []string{broker.DefaultURL}, "the default"
	}
	if urls := broker.SplitURLs(firstNonEmpty(f.ManagementURLFlag, f.Getenv("EXPIRYCTL_MANAGEMENT_URL"))); len(urls) > 0 {
		c.ManagementURLs = urls
	}
	return c, nil
}

// connectionOfQueue is the name of the connection a --queue value is on,
// which the letters captured from it record: SQS's or RabbitMQ's; "" for
// a job store's, whose queue name carries its connection's.
func (f *Factory) connectionOfQueue(queue string) (string, error) {
	if _, ok := f.jobStoreOf(queue); ok {
		return "", nil
	}
	c, err := f.publishConnection(queueSystemOf(queue))
	return c.Name, err
}

// publishConnection is the connection a run of a publishing system goes
// through: RabbitMQConnection, or a driver.Broker's (brokerConnection).
func (f *Factory) publishConnection(system deadletter.System) (config.Connection, error) {
	if b, ok := brokerFor(system); ok {
		return f.brokerConnection(b)
	}
	return f.RabbitMQConnection()
}

// connectionNamed is the connection of system the context calls name,
// with its password: what a letter's or a request's queue name resolves
// to. A name the context does not define, or defines for another
// system, is refused before anything connects.
func (f *Factory) connectionNamed(system deadletter.System, name string) (config.Connection, string, error) {
	x, err := f.Context()
	if err != nil {
		return config.Connection{}, "", err
	}
	c, ok := x.Connection(name)
	if !ok {
		cfg, _ := f.Config()
		unknown := &config.UnknownConnectionError{Name: name, System: string(system), Context: x.Name,
			Known: x.ConnectionNames(), File: cfg.Path}
		return config.Connection{}, "", &replay.Refusal{Rule: unknown.Rule(), Message: unknown.Error()}
	}
	if c.System != string(system) {
		return config.Connection{}, "", &replay.Refusal{Rule: "connection-unknown", Message: fmt.Sprintf(
			"connection %q (%s) is a %s connection, and a %s queue names it: nothing was dialled; "+
				"the letter, request or flag that names it did not come from it", name, c.Where, c.System, system)}
	}
	password, err := f.secretOf(c)
	if err != nil {
		return config.Connection{}, "", err
	}
	return c, password, nil
}

// configuredOfSystem are the context's connections of system, for a URL
// typed on the command line to be matched with the one it reaches.
func (f *Factory) configuredOfSystem(system deadletter.System) []config.Connection {
	x, err := f.Context()
	if err != nil {
		return nil
	}
	return x.OfSystem(string(system))
}

// configSecrets are the passwords the configuration's secrets give, so
// that no message shows one; the ones that cannot be read are left out.
func (f *Factory) configSecrets() []string {
	x, err := f.Context()
	if err != nil || x == nil {
		return nil
	}
	var out []string
	for _, c := range x.All() {
		if p, err := c.Password.Resolve(c.Name, f.Getenv); err == nil && p != "" {
			out = append(out, p)
		}
	}
	return out
}

// explicitLogin says whether a PostgreSQL URL or key/value string names
// its login, or PGUSER does; without either, libpq would log in as the
// operating system's user, which expiryctl never does.
func explicitLogin(raw string, getenv func(string) string) bool {
	if getenv("PGUSER") != "" {
		return true
	}
	// What does not parse is the connect's own usage error to give.
	if _, err := pgconn.ParseConfig(raw); err != nil {
		return true
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		if u.User != nil && u.User.Username() != "" {
			return true
		}
		return u.Query().Get("user") != ""
	}
	for _, field := range strings.Fields(raw) {
		if k, v, ok := strings.Cut(field, "="); ok && strings.TrimSpace(k) == "user" && strings.Trim(v, "'") != "" {
			return true
		}
	}
	return false
}

// noLogin is the refusal of a PostgreSQL connection, named by what, that
// names no login.
func noLogin(what, raw string) error {
	return &FlagError{Err: fmt.Errorf("%s %s names no login, and expiryctl never logs in as the operating system's user: "+
		"name one in the URL (postgres://USER@HOST:5432/DATABASE), or set PGUSER", what, dsn.Redact(raw))}
}

// queueSystemOf is the publishing system a --queue value names: the
// driver.Broker's whose queue names it has the form of, else
// deadletter.DefaultSystem.
func queueSystemOf(queue string) deadletter.System {
	if b, ok := brokerNamed(queue); ok {
		return b.Traits().System
	}
	return deadletter.DefaultSystem
}
