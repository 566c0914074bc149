package commands

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mattn/go-isatty"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/approval"
	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// IOStreams are the process's standard streams, injected so that tests can
// capture output and pretend to be a terminal.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// StdoutTTY and StderrTTY say whether the streams are terminals: tables and
	// progress are for terminals, tab-separated values for pipes.
	StdoutTTY bool
	StderrTTY bool
	// Color is false when NO_COLOR is set or stdout is not a terminal.
	Color bool
	// TerminalSize is the size of the terminal stdout is, read at each
	// call (a terminal can be resized while a watch runs); ok is false when
	// it cannot tell. Nil means the size of Out, when Out is a terminal.
	TerminalSize func() (width, height int, ok bool)
}

// terminal returns the size of the terminal stdout is, ok false when it is
// not one or cannot tell.
func (s *IOStreams) terminal() (width, height int, ok bool) {
	if !s.StdoutTTY {
		return 0, 0, false
	}
	if s.TerminalSize != nil {
		return s.TerminalSize()
	}
	return terminalSize(s.Out)
}

// SystemIO returns the process's own streams.
func SystemIO() *IOStreams {
	outTTY := isatty.IsTerminal(os.Stdout.Fd())
	_, noColor := os.LookupEnv("NO_COLOR")
	return &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		StdoutTTY: outTTY,
		StderrTTY: isatty.IsTerminal(os.Stderr.Fd()),
		Color:     outTTY && !noColor && os.Getenv("TERM") != "dumb",
		// Stdout's size, not Out's: a watch draws each frame into a buffer
		// before it goes to the terminal.
		TerminalSize: func() (int, int, bool) { return terminalSize(os.Stdout) },
	}
}

// Factory hands commands their dependencies. Connections are made lazily, on
// first use, so that --help and flag errors never dial a server.
type Factory struct {
	IO *IOStreams
	// Now is the clock; governance code reads time only through it.
	Now func() time.Time
	// Getenv reads the environment (os.Getenv unless a test replaces it).
	Getenv func(string) string
	// LookupEnv reads the environment where set-but-empty differs from
	// unset (PAGER=""); nil means through Getenv, empty as unset.
	LookupEnv func(string) (string, bool)

	// Values of the global flags; empty means "use the environment, then the
	// configuration file's context, then the default".
	ConfigFlag        string
	ContextFlag       string
	DatabaseURLFlag   string
	AMQPURLFlag       string
	ManagementURLFlag string
	ActorFlag         string
	// OutcomeURLFlag is `replay run --outcome-url`: the reservation
	// database the policy's outcome query runs against.
	OutcomeURLFlag string
	// KeyringFlag and RequireSignedFlag are `replay run --keyring` and
	// `--require-signed-approvals`: the runner's own rule for signed
	// approvals.
	KeyringFlag       string
	RequireSignedFlag bool
	// DBTimeoutFlag and AMQPHeartbeatFlag are --db-timeout and
	// --amqp-heartbeat (timeouts.go).
	DBTimeoutFlag     durationSetting
	AMQPHeartbeatFlag durationSetting
	// Governed is set for the commands that governance binds (root.go's
	// governedCommands): only they say that it is advisory for the login.
	Governed bool
	// migrating leaves statement_timeout and lock_timeout unset on the
	// pool, for `migrate` (store.Options.ServerTimeouts).
	migrating bool

	configOnce sync.Once
	config     *config.Config
	configErr  error

	// typedRefs are the job-store queues reached by what a person typed
	// on this process's command line, by name (typedQueue); advised the
	// job-store connections whose login's standing was said
	// (adviseLogin). jobStoreMu guards both.
	jobStoreMu sync.Mutex
	typedRefs  map[string]storeRef
	advised    map[string]bool

	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error

	// amqpMu guards amqpConn, which is dialled again once it is closed.
	amqpMu   sync.Mutex
	amqpConn *amqp.Connection
	// amqpDialled says a dial was tried, for the test that --help dials
	// nothing.
	amqpDialled bool
	// amqpNode is the index in AMQPURLs of the node amqpConn reached: once
	// that connection is lost, the next dial starts at the node after it.
	amqpNode int

	// outcomesMu guards outcomes, which is connected again after a failed
	// connect: a long-lived reader (metrics serve, the terminal UI) must
	// see the reservation database once it is back, not its first error.
	outcomesMu sync.Mutex
	outcomes   *pgxpool.Pool
}

// NewFactory returns a Factory over the process's streams and environment.
func NewFactory() *Factory {
	return &Factory{IO: SystemIO(), Now: time.Now, Getenv: os.Getenv, LookupEnv: os.LookupEnv}
}

func (f *Factory) lookupEnv(name string) (string, bool) {
	if f.LookupEnv != nil {
		return f.LookupEnv(name)
	}
	v := f.Getenv(name)
	return v, v != ""
}

// DatabaseURL resolves --database-url, then EXPIRYCTL_DATABASE_URL, then the
// context's archive (with the password its secret gives), then the
// default. A configuration that cannot be read is RawDB's error, which
// then connects to nothing.
func (f *Factory) DatabaseURL() string {
	u, _ := f.archiveURL()
	return u
}

// archiveURL is DatabaseURL, with the error of a configuration that
// cannot be used or an archive's password source that gives nothing.
func (f *Factory) archiveURL() (string, error) {
	u, err := f.postgresURL(f.DatabaseURLFlag, "EXPIRYCTL_DATABASE_URL", func(x *config.Context) *config.Connection { return x.Archive })
	return cmp.Or(u, store.DefaultURL), err
}

// postgresURL resolves a PostgreSQL URL: flag, then the environment
// variable env, then the connection pick takes from the context, with
// the password its secret gives; "" when none gives one. err is the
// configuration's, which stops a command that connects whatever gave the
// URL, or the secret's.
func (f *Factory) postgresURL(flag, env string, pick func(*config.Context) *config.Connection) (string, error) {
	x, err := f.Context()
	if u := firstNonEmpty(flag, f.Getenv(env)); u != "" || err != nil {
		return u, err
	}
	c := pick(x)
	if c == nil || len(c.URLs) == 0 {
		return "", nil
	}
	password, err := f.secretOf(*c)
	return withPassword(c.URLs[0], password), err
}

// AMQPURL is the first of AMQPURLs: the node whose management API and
// virtual host the live queues are read from.
func (f *Factory) AMQPURL() string {
	return f.AMQPURLs()[0]
}

// ApprovalCheck resolves --keyring (then EXPIRYCTL_KEYRING) and
// --require-signed-approvals (then EXPIRYCTL_REQUIRE_SIGNED_APPROVALS=1):
// the approvals a runner of this process accepts. Nil: unsigned approvals
// run.
func (f *Factory) ApprovalCheck() (*replay.ApprovalCheck, error) {
	check := &replay.ApprovalCheck{Required: f.RequireSignedFlag}
	if v := f.Getenv("EXPIRYCTL_REQUIRE_SIGNED_APPROVALS"); v != "" && v != "0" && v != "false" {
		check.Required = true
	}
	if path := firstNonEmpty(f.KeyringFlag, f.Getenv("EXPIRYCTL_KEYRING")); path != "" {
		k, err := approval.LoadKeyring(path)
		if err != nil {
			return nil, &FlagError{Err: fmt.Errorf("--keyring: %w", err)}
		}
		check.Keyring = k
	}
	if check.Keyring == nil && !check.Required {
		return nil, nil
	}
	return check, nil
}

// OutcomeURL resolves --outcome-url, then EXPIRYCTL_OUTCOME_URL, then the
// context's outcomes (with the password its secret gives); empty means
// the outcome query runs against expiryctl's own database. It is never
// stored: it may carry a password.
func (f *Factory) OutcomeURL() string {
	u, _ := f.outcomeURL()
	return u
}

// outcomeURL is OutcomeURL, with postgresURL's error.
func (f *Factory) outcomeURL() (string, error) {
	return f.postgresURL(f.OutcomeURLFlag, "EXPIRYCTL_OUTCOME_URL", func(x *config.Context) *config.Connection { return x.Outcomes })
}

// connectionURLs are the URLs whose passwords no message may show.
func (f *Factory) connectionURLs() []string {
	urls := append(append([]string{f.DatabaseURL()}, f.ManagementURLs()...), f.AMQPURLs()...)
	if u := f.OutcomeURL(); u != "" {
		urls = append(urls, u)
	}
	x, err := f.Context()
	if err != nil {
		return urls
	}
	for _, c := range x.Connections {
		urls = append(urls, c.URLs...)
	}
	return urls
}

// Outcomes connects to the reservation database of OutcomeURL and keeps
// the pool; nil (and no error) when none is set, so that the outcome query
// runs against expiryctl's database. A failed connect is not kept: the
// next call tries again, so that `metrics serve` and the terminal UI,
// started while the reservation database was down, read it once it is up.
func (f *Factory) Outcomes(ctx context.Context) (*pgxpool.Pool, error) {
	url, err := f.outcomeURL()
	if err != nil || url == "" {
		return nil, err
	}
	if !explicitLogin(url, f.Getenv) {
		return nil, noLogin("the reservation database's URL (--outcome-url, EXPIRYCTL_OUTCOME_URL or the context's outcomes)", url)
	}
	f.outcomesMu.Lock()
	defer f.outcomesMu.Unlock()
	if f.outcomes != nil {
		return f.outcomes, nil
	}
	opts, err := f.storeOptions(true)
	if err != nil {
		return nil, err
	}
	opts.Setting = "--outcome-url / EXPIRYCTL_OUTCOME_URL"
	pool, err := store.OpenWith(ctx, url, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to the reservation database (--outcome-url / EXPIRYCTL_OUTCOME_URL): %w", err)
	}
	f.outcomes = pool
	return pool, nil
}

// Actor resolves --actor, then EXPIRYCTL_ACTOR. Empty means the database
// login itself: identity rests on the login (session_user), and the actor
// is at most a label the database records beside it (refused under
// identity_mode db-role when it differs from the login).
func (f *Factory) Actor() string {
	return firstNonEmpty(f.ActorFlag, f.Getenv("EXPIRYCTL_ACTOR"))
}

// RawDB connects to PostgreSQL without checking the schema, for `migrate`.
func (f *Factory) RawDB(ctx context.Context) (*pgxpool.Pool, error) {
	f.poolOnce.Do(func() {
		url, err := f.archiveURL()
		if err != nil {
			f.poolErr = err
			return
		}
		if !explicitLogin(url, f.Getenv) {
			f.poolErr = noLogin("the archive's URL (--database-url, EXPIRYCTL_DATABASE_URL or the context's archive)", url)
			return
		}
		opts, err := f.storeOptions(!f.migrating)
		if err != nil {
			f.poolErr = err
			return
		}
		// Every audit row this process writes names the build that
		// wrote it (the reservation database of Outcomes is not told).
		opts.Build = readBuildVersion().Claim()
		f.pool, f.poolErr = store.OpenWith(ctx, f.DatabaseURL(), opts)
		if f.poolErr == nil {
			f.warnAdvisory(ctx, f.pool)
		}
	})
	return f.pool, f.poolErr
}

// DB connects to PostgreSQL and checks that the schema is current, so that a
// missing migration is reported as such rather than as an SQL error.
func (f *Factory) DB(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := f.RawDB(ctx)
	if err != nil {
		return nil, err
	}
	if err := store.CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	return pool, nil
}

// warnAdvisory says, on stderr, when this connection's login is a superuser
// or the schema's owner and the command is one that governance binds: the
// rules are the database's, and such a login can change the database. A
// read is not governed, so it is not told (it was, on every command, which
// buried the line that mattered).
func (f *Factory) warnAdvisory(ctx context.Context, pool *pgxpool.Pool) {
	if !f.Governed {
		return
	}
	standing, err := store.LoginStanding(ctx, pool)
	if err != nil || standing.Governed() {
		return
	}
	fmt.Fprintln(f.IO.ErrOut, advisoryLine(standing))
}

// advisoryLine is the warning in one line that fits 80 columns for a
// common login name; `expiryctl access list` and docs/governance.md say
// what each bypass allows.
func advisoryLine(s store.Standing) string {
	return fmt.Sprintf("warning: %s (%s): governance is advisory; use your own login",
		s.Login, strings.Join(s.Kinds(), ", "))
}

// AMQP connects to RabbitMQ, once while the connection lasts: after the
// broker closed it (a restart, a lost network), the next call dials again,
// starting at the next node of a cluster's list, so that a command that
// follows a queue can reconnect, to another node while one is down.
func (f *Factory) AMQP() (*amqp.Connection, error) {
	f.amqpMu.Lock()
	defer f.amqpMu.Unlock()
	if f.amqpConn != nil && !f.amqpConn.IsClosed() {
		return f.amqpConn, nil
	}
	if _, err := f.RabbitMQConnection(); err != nil {
		return nil, err
	}
	f.amqpDialled = true
	opts, err := f.dialOptions(nil)
	if err != nil {
		return nil, err
	}
	start := 0
	if f.amqpConn != nil {
		start = f.amqpNode + 1
	}
	conn, node, err := broker.DialAny(f.AMQPURLs(), start, opts)
	if err != nil {
		return nil, err
	}
	f.amqpConn, f.amqpNode = conn, node
	return conn, nil
}

// Close releases whatever connections the commands opened.
func (f *Factory) Close() {
	if f.pool != nil {
		f.pool.Close()
	}
	f.amqpMu.Lock()
	if f.amqpConn != nil {
		_ = f.amqpConn.Close()
	}
	f.amqpMu.Unlock()
	f.outcomesMu.Lock()
	if f.outcomes != nil {
		f.outcomes.Close()
	}
	f.outcomesMu.Unlock()
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
