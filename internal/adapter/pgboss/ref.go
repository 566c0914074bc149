package pgboss

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// System is the name of pg-boss's connections in the configuration file
// and of the system its letters carry (dead_letters.source_system).
const System = "pgboss"

// QueuePrefix begins every pg-boss queue's name as letters carry it:
// pgboss://CONNECTION/QUEUE.
const QueuePrefix = "pgboss://"

// DefaultSchema is the schema pg-boss keeps its tables in unless its
// constructor's schema option names another.
const DefaultSchema = "pgboss"

// ConfigRules are what a pg-boss connection takes in the configuration
// file: the postgres:// URL of pg-boss's database, naming the login
// (expiryctl never logs in as the operating system's user), with
// ?schema=NAME when pg-boss's schema is not pgboss, and sslmode and the
// other settings of pgjobs.Settings in its query.
var ConfigRules = config.Rules{System: System, Keys: []string{"url"}, Check: func(c config.Connection) error {
	if err := config.CheckURL(c, []string{"postgres", "postgresql"}, true); err != nil {
		return err
	}
	if len(c.URLs) != 1 {
		return fmt.Errorf("a pg-boss connection has one url, pg-boss's database")
	}
	_, err := RefFor(c, "", "q")
	return err
}}

// PasswordEnv is the environment variable a pg-boss login's password may
// come from, so that it need not be in argv, where ps shows it to every
// user of the machine. A password in the reference wins.
const PasswordEnv = "EXPIRYCTL_PGBOSS_PASSWORD"

// StateFailed is the state of job a source captures: pg-boss gave up on
// the job (its retries, retry_limit, are spent), and it stays there until
// pg-boss's maintenance deletes it (deletion_seconds after completed_on,
// seven days by default).
const StateFailed = "failed"

// Ref names one pg-boss queue in one PostgreSQL database, and the login
// that reaches it (its Endpoint: Host, Port, Database, User and the
// connection settings). Its Name carries no credentials and no server,
// only the connection's name; String is Name, so a Ref printed by mistake
// shows no password.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn string
	pgjobs.Endpoint
	// Schema is pg-boss's schema in the database (its constructor's
	// schema option), DefaultSchema unless the URL's ?schema= names
	// another.
	Schema string
	// Queue is pg-boss's queue name (job.name, queue.name).
	Queue string
}

// queueName is what pg-boss takes for a queue's name (its
// assertObjectName): letters, digits, '_', '.', '-' and '/'.
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.\-/]+$`)

// schemaName is a schema as pg-boss's schema option names it unquoted,
// which PostgreSQL folds to lower case; pg-boss allows 50 bytes.
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// IsRef says whether s names a pg-boss queue: it begins with pgboss://.
func IsRef(s string) bool {
	return len(s) >= len(QueuePrefix) && strings.EqualFold(s[:len(QueuePrefix)], QueuePrefix)
}

// ParseRef reads pgboss://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE/QUEUE
// with optional ?schema=NAME (default pgboss) and sslmode, sslrootcert,
// sslcert, sslkey, connect_timeout and application_name. QUEUE is
// everything after the database, so a queue named with '/' (which
// pg-boss allows) needs no escaping. The password may come from
// EXPIRYCTL_PGBOSS_PASSWORD instead. No error it returns shows the
// password.
func ParseRef(s string) (Ref, error) {
	const form = "name a pg-boss queue as pgboss://USER@HOST[:PORT]/DATABASE/QUEUE[?schema=NAME&sslmode=…]"
	shown := pgjobs.Redact(s)
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %s", shown, form)
	}
	e, queue, query, err := pgjobs.ParseURL(s, PasswordEnv, form)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %w", shown, err)
	}
	ref := Ref{Endpoint: e, Queue: queue}
	if err := checkQueueName(ref.Queue); err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %w", shown, err)
	}
	if err := ref.setQuery(query); err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %w", shown, err)
	}
	// Two pg-boss schemas in one database are two pg-boss instances, and
	// so two connections: a schema other than the default is part of
	// what the derived name is made of. The '/' cannot be in a database's
	// escaped name, so no database reads like another's schema.
	what := url.PathEscape(ref.Database)
	if ref.Schema != DefaultSchema {
		what += "/" + ref.Schema
	}
	ref.Conn = config.DeriveName(System, ref.HostPort(), what)
	return ref, nil
}

// checkQueueName refuses a name pg-boss would not take for a queue.
func checkQueueName(q string) error {
	if !queueName.MatchString(q) {
		return fmt.Errorf("%q is no pg-boss queue's name: pg-boss names queues with letters, digits, '_', '.', '-' and '/'", q)
	}
	return nil
}

// setQuery takes the schema and the connection settings of a URL's query.
func (r *Ref) setQuery(query url.Values) error {
	r.Schema = DefaultSchema
	for key, values := range query {
		v := values[len(values)-1]
		if key != "schema" {
			if err := r.Settings.Set(key, v, "schema"); err != nil {
				return err
			}
			continue
		}
		if !schemaName.MatchString(v) {
			return fmt.Errorf("schema %q is not a schema as pg-boss's schema option names one unquoted "+
				"(a letter or '_', then letters, digits or '_', at most 50): a quoted schema is not supported", v)
		}
		// PostgreSQL folds an unquoted name, and so does pg-boss.
		r.Schema = strings.ToLower(v)
	}
	return nil
}

// SplitName reads a pg-boss queue's name as letters and requests carry
// it, pgboss://CONNECTION/QUEUE (QUEUE path-escaped, so that a queue named
// with '/' is one segment), into the connection's name and the queue's
// part, which RefFor reads. A name whose connection part is not a
// connection's name (a HOST:PORT, a login) is refused: a name never says
// which server to dial.
func SplitName(name string) (conn, queue string, err error) {
	if !IsRef(name) {
		return "", "", fmt.Errorf("%q is not a pg-boss queue's name: want pgboss://CONNECTION/QUEUE", pgjobs.Redact(name))
	}
	rest := name[len(QueuePrefix):]
	conn, queue, ok := strings.Cut(rest, "/")
	if !ok || !config.ValidName(conn) || queue == "" || strings.ContainsAny(queue, "/?#") {
		return "", "", fmt.Errorf("%q is not a pg-boss queue's name pgboss://CONNECTION/QUEUE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a queue's name never says which server to dial", pgjobs.Redact(name), config.NameRule)
	}
	return conn, queue, nil
}

// RefFor is queue (QUEUE as a letter's name carries it, path-escaped) on
// the connection c, logged in with password when c's URL holds none.
// pg-boss's schema is the connection's (its URL's ?schema=), never the
// queue's: it says which pg-boss instance the connection reaches.
func RefFor(c config.Connection, password, queue string) (Ref, error) {
	e, connQuery, err := pgjobs.EndpointFor(c, password)
	if err != nil {
		return Ref{}, err
	}
	ref := Ref{Conn: c.Name, Endpoint: e}
	if strings.Contains(queue, "?") {
		return Ref{}, fmt.Errorf("the pg-boss queue %q: a queue's name takes no settings: how to reach the server, and pg-boss's schema, are the connection's", queue)
	}
	if ref.Queue, err = url.PathUnescape(queue); err != nil || ref.Queue == "" {
		return Ref{}, fmt.Errorf("the pg-boss queue %q: not a queue's name", queue)
	}
	if err := checkQueueName(ref.Queue); err != nil {
		return Ref{}, err
	}
	settings, err := url.ParseQuery(connQuery)
	if err != nil {
		return Ref{}, fmt.Errorf("connection %q: its url's query is unreadable", c.Name)
	}
	if err := ref.setQuery(settings); err != nil {
		return Ref{}, fmt.Errorf("connection %q: %w", c.Name, err)
	}
	return ref, nil
}

// Server is where the Ref reaches, HOST:PORT/DATABASE, and pg-boss's
// schema when it is not pgboss, to tell whether a URL typed on the command
// line reaches a configured connection's server.
func (r Ref) Server() string {
	s := r.Endpoint.Server()
	if r.Schema != "" && r.Schema != DefaultSchema {
		s += "?schema=" + r.Schema
	}
	return s
}

// Login refuses a Ref that names no login: PostgreSQL would take the
// operating system's user, which on an operator's machine may be a
// superuser of pg-boss's database.
func (r Ref) Login() error {
	if r.User == "" {
		return fmt.Errorf("the pg-boss database %s: no login named, and expiryctl never logs in as the operating system's user: "+
			"name one in the connection's url (postgres://USER@HOST/DATABASE), or in --queue pgboss://USER@HOST/DATABASE/QUEUE", r.DatabaseName())
	}
	return nil
}

// Name is the queue's name as letters and the audit trail carry it:
// pgboss://CONNECTION/QUEUE, with no server, no credentials and no
// settings, the queue path-escaped.
func (r Ref) Name() string {
	return QueuePrefix + r.Conn + "/" + url.PathEscape(r.Queue)
}

// DatabaseName names pg-boss's database in messages: the connection's
// name and the server it reaches.
func (r Ref) DatabaseName() string {
	return fmt.Sprintf("%q (%s)", r.Conn, r.Server())
}

// String is Name: a Ref in a log or an error shows no password.
func (r Ref) String() string { return r.Name() }

// GoString is Name too, so that %#v shows no password either.
func (r Ref) GoString() string { return "pgboss.Ref(" + r.Name() + ")" }

// table is pg-boss's table name (job, queue) in the Ref's schema, quoted.
func (r Ref) table(name string) string {
	schema := r.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// PoolConfig is the pgx pool configuration that reaches pg-boss's
// database as the reference's login.
func (r Ref) PoolConfig() (*pgxpool.Config, error) {
	if err := r.Login(); err != nil {
		return nil, err
	}
	cfg, err := r.Endpoint.PoolConfig()
	if err != nil {
		return nil, fmt.Errorf("the pg-boss database %s: %w", r.DatabaseName(), err)
	}
	return cfg, nil
}

// jobStore is pg-boss's database as package pgjobs reaches and names it.
func (r Ref) jobStore() pgjobs.Database {
	return pgjobs.Database{System: System, Title: "pg-boss", Name: r.DatabaseName(), Jobs: r.table("job")}
}
