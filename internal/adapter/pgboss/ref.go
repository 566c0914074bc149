package pgboss

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
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
// other settings of connParams in its query.
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

// defaultPort is PostgreSQL's: a queue name always carries a port, so two
// spellings of one database are one queue.
const defaultPort = 5432

// Ref names one pg-boss queue in one PostgreSQL database, and the login
// that reaches it. Its Name carries no credentials and no server, only
// the connection's name; String is Name, so a Ref printed by mistake
// shows no password.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn     string
	Host     string
	Port     int
	Database string
	// Schema is pg-boss's schema in the database (its constructor's
	// schema option), DefaultSchema unless the URL's ?schema= names
	// another.
	Schema string
	// Queue is pg-boss's queue name (job.name, queue.name).
	Queue string
	// User is the login; a Ref with none reaches nothing (Login).
	User string
	// params are the connection settings the reference gave (sslmode, …).
	params   map[string]string
	password string
}

// connParams are the libpq settings a reference may carry besides schema:
// those about how to reach the server safely, nothing that changes what
// a session sees.
var connParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

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
	shown := redact(s)
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %s", shown, form)
	}
	// url.Parse's own errors quote the whole input, password and all.
	u, err := url.Parse(s)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: not a URL; %s", shown, form)
	}
	ref := Ref{Host: strings.ToLower(u.Hostname()), Port: defaultPort, params: map[string]string{}}
	if ref.Host == "" {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: no host; %s", shown, form)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Ref{}, fmt.Errorf("invalid pg-boss queue %q: port %q is not a TCP port", shown, p)
		}
		ref.Port = n
	}
	if u.User != nil {
		ref.User = u.User.Username()
		ref.password, _ = u.User.Password()
	}
	if ref.password == "" {
		ref.password = os.Getenv(PasswordEnv)
	}
	db, queue, ok := strings.Cut(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if ok {
		ref.Database, err = url.PathUnescape(db)
		if err == nil {
			ref.Queue, err = url.PathUnescape(queue)
		}
	}
	if !ok || err != nil || ref.Database == "" || ref.Queue == "" {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: want /DATABASE/QUEUE after the host; %s", shown, form)
	}
	if err := checkQueueName(ref.Queue); err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: %w", shown, err)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid pg-boss queue %q: unreadable query", shown)
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
	ref.Conn = config.DeriveName(System, net.JoinHostPort(ref.Host, strconv.Itoa(ref.Port)), what)
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
	if r.params == nil {
		r.params = map[string]string{}
	}
	for key, values := range query {
		v := values[len(values)-1]
		switch {
		case key == "schema":
			if !schemaName.MatchString(v) {
				return fmt.Errorf("schema %q is not a schema as pg-boss's schema option names one unquoted "+
					"(a letter or '_', then letters, digits or '_', at most 50): a quoted schema is not supported", v)
			}
			// PostgreSQL folds an unquoted name, and so does pg-boss.
			r.Schema = strings.ToLower(v)
		case key == "sslmode" && !slices.Contains(sslModes, v):
			return fmt.Errorf("sslmode %q is none of %s", v, strings.Join(sslModes, ", "))
		case slices.Contains(connParams, key):
			r.params[key] = v
		default:
			return fmt.Errorf("unknown setting %q (known: schema, %s)", key, strings.Join(connParams, ", "))
		}
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
		return "", "", fmt.Errorf("%q is not a pg-boss queue's name: want pgboss://CONNECTION/QUEUE", redact(name))
	}
	rest := name[len(QueuePrefix):]
	conn, queue, ok := strings.Cut(rest, "/")
	if !ok || !config.ValidName(conn) || queue == "" || strings.ContainsAny(queue, "/?#") {
		return "", "", fmt.Errorf("%q is not a pg-boss queue's name pgboss://CONNECTION/QUEUE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a queue's name never says which server to dial", redact(name), config.NameRule)
	}
	return conn, queue, nil
}

// RefFor is queue (QUEUE as a letter's name carries it, path-escaped) on
// the connection c, logged in with password when c's URL holds none.
// pg-boss's schema is the connection's (its URL's ?schema=), never the
// queue's: it says which pg-boss instance the connection reaches.
func RefFor(c config.Connection, password, queue string) (Ref, error) {
	if len(c.URLs) == 0 {
		return Ref{}, fmt.Errorf("connection %q names no url", c.Name)
	}
	u, err := url.Parse(c.URLs[0])
	if err != nil {
		return Ref{}, fmt.Errorf("connection %q: its url is not a URL", c.Name)
	}
	ref := Ref{Conn: c.Name, Host: strings.ToLower(u.Hostname()), Port: defaultPort, params: map[string]string{}}
	if ref.Host == "" {
		return Ref{}, fmt.Errorf("connection %q: its url names no host", c.Name)
	}
	if p := u.Port(); p != "" {
		if ref.Port, err = strconv.Atoi(p); err != nil || ref.Port < 1 || ref.Port > 65535 {
			return Ref{}, fmt.Errorf("connection %q: port %q is not a TCP port", c.Name, p)
		}
	}
	if u.User != nil {
		ref.User = u.User.Username()
		ref.password, _ = u.User.Password()
	}
	if ref.password == "" {
		ref.password = password
	}
	if ref.Database = strings.TrimPrefix(u.Path, "/"); ref.Database == "" || strings.Contains(ref.Database, "/") {
		return Ref{}, fmt.Errorf("connection %q: its url names no database (postgres://USER@HOST:PORT/DATABASE)", c.Name)
	}
	if strings.Contains(queue, "?") {
		return Ref{}, fmt.Errorf("the pg-boss queue %q: a queue's name takes no settings: how to reach the server, and pg-boss's schema, are the connection's", queue)
	}
	if ref.Queue, err = url.PathUnescape(queue); err != nil || ref.Queue == "" {
		return Ref{}, fmt.Errorf("the pg-boss queue %q: not a queue's name", queue)
	}
	if err := checkQueueName(ref.Queue); err != nil {
		return Ref{}, err
	}
	settings, err := url.ParseQuery(u.RawQuery)
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
	s := net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) + "/" + r.Database
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
	// The password is set after parsing: a parse error then cannot show it.
	dsn := []string{"host=" + dsnValue(r.Host), "port=" + strconv.Itoa(r.Port), "dbname=" + dsnValue(r.Database), "user=" + dsnValue(r.User)}
	for _, k := range connParams {
		if v, ok := r.params[k]; ok {
			dsn = append(dsn, k+"="+dsnValue(v))
		}
	}
	cfg, err := pgxpool.ParseConfig(strings.Join(dsn, " "))
	if err != nil {
		return nil, fmt.Errorf("the pg-boss database %s: %w", r.DatabaseName(), err)
	}
	if r.password != "" {
		cfg.ConnConfig.Password = r.password
	}
	return cfg, nil
}

// connConfig is PoolConfig's connection part, for a single connection.
func (r Ref) connConfig() (*pgx.ConnConfig, error) {
	cfg, err := r.PoolConfig()
	if err != nil {
		return nil, err
	}
	return cfg.ConnConfig, nil
}

// dsnValue quotes v for a libpq keyword/value string.
func dsnValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// redact is s with whatever stands between the scheme and the host's @
// replaced, for error messages about a reference that may not even parse.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return s
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
