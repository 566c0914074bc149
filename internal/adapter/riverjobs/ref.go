package riverjobs

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
)

// System is the name of River's connections in the configuration file.
const System = "river"

// ConfigRules are what a River connection takes in the configuration
// file: the postgres:// URL of River's database, naming the login
// (expiryctl never logs in as the operating system's user), with
// sslmode and the other settings of connParams in its query.
var ConfigRules = config.Rules{System: System, Keys: []string{"url"}, Check: func(c config.Connection) error {
	if err := config.CheckURL(c, []string{"postgres", "postgresql"}, true); err != nil {
		return err
	}
	if len(c.URLs) != 1 {
		return fmt.Errorf("a River connection has one url, River's database")
	}
	_, err := RefFor(c, "", "q")
	return err
}}

// PasswordEnv is the environment variable a River login's password may
// come from, so that it need not be in argv, where ps shows it to every
// user of the machine. A password in the reference wins.
const PasswordEnv = "EXPIRYCTL_RIVER_PASSWORD"

// The states of river_job a source captures.
const (
	StateDiscarded = "discarded"
	StateCancelled = "cancelled"
)

// defaultPort is PostgreSQL's: a queue name always carries a port, so two
// spellings of one database are one queue.
const defaultPort = 5432

// Ref names one River queue in one PostgreSQL database, and the login that
// reaches it. Its Name carries no credentials and no server, only the
// connection's name; String is Name, so a Ref printed by mistake shows no
// password.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn     string
	Host     string
	Port     int
	Database string
	// Queue is River's queue name (river_job.queue).
	Queue string
	// User is the login; a Ref with none reaches nothing (Login).
	User string
	// States are the river_job states a source captures: discarded, and
	// cancelled when asked for.
	States []string
	// params are the connection settings the reference gave (sslmode, …).
	params   map[string]string
	password string
}

// connParams are the libpq settings a reference may carry besides states:
// those about how to reach the server safely, nothing that changes what
// a session sees.
var connParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// IsRef says whether s names a River queue: it begins with river://.
func IsRef(s string) bool {
	return len(s) >= len(QueuePrefix) && strings.EqualFold(s[:len(QueuePrefix)], QueuePrefix)
}

// ParseRef reads river://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE/QUEUE with
// optional ?sslmode=…&states=discarded,cancelled (and sslrootcert,
// sslcert, sslkey, connect_timeout, application_name). The password may
// come from EXPIRYCTL_RIVER_PASSWORD instead. No error it returns shows
// the password.
func ParseRef(s string) (Ref, error) {
	const form = "name a River queue as river://[USER@]HOST[:PORT]/DATABASE/QUEUE[?sslmode=…&states=discarded,cancelled]"
	shown := redact(s)
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("invalid River queue %q: %s", shown, form)
	}
	// url.Parse's own errors quote the whole input, password and all.
	u, err := url.Parse(s)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid River queue %q: not a URL; %s", shown, form)
	}
	ref := Ref{Host: strings.ToLower(u.Hostname()), Port: defaultPort, params: map[string]string{}}
	if ref.Host == "" {
		return Ref{}, fmt.Errorf("invalid River queue %q: no host; %s", shown, form)
	}

	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Ref{}, fmt.Errorf("invalid River queue %q: port %q is not a TCP port", shown, p)
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
		return Ref{}, fmt.Errorf("invalid River queue %q: want /DATABASE/QUEUE after the host; %s", shown, form)
	}
	// River's own limit (the queue_length constraint of river_job).
	if len(ref.Queue) >= 128 {
		return Ref{}, fmt.Errorf("invalid River queue %q: a River queue name is shorter than 128 characters", shown)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid River queue %q: unreadable query", shown)
	}
	ref.Conn = config.DeriveName(System, net.JoinHostPort(ref.Host, strconv.Itoa(ref.Port)), url.PathEscape(ref.Database))
	if err := ref.setQuery(query); err != nil {
		return Ref{}, fmt.Errorf("invalid River queue %q: %w", shown, err)
	}
	return ref, nil
}

// setQuery takes the states and connection settings of a reference's
// query.
func (r *Ref) setQuery(query url.Values) error {
	r.States = []string{StateDiscarded}
	if r.params == nil {
		r.params = map[string]string{}
	}
	for key, values := range query {
		v := values[len(values)-1]
		switch {
		case key == "states":
			states, err := parseStates(v)
			if err != nil {
				return err
			}
			r.States = states
		case key == "sslmode" && !slices.Contains(sslModes, v):
			return fmt.Errorf("sslmode %q is none of %s", v, strings.Join(sslModes, ", "))
		case slices.Contains(connParams, key):
			r.params[key] = v
		default:
			return fmt.Errorf("unknown setting %q (known: states, %s)", key, strings.Join(connParams, ", "))
		}
	}
	return nil
}

// SplitName reads a River queue's name as letters and requests carry it,
// river://CONNECTION/QUEUE, into the connection's name and the queue (with
// a capture's ?states=… when given, which RefFor reads). A name whose
// connection part is not a connection's name (a HOST:PORT, a login) is
// refused: a name never says which server to dial.
func SplitName(name string) (conn, queue string, err error) {
	if !IsRef(name) {
		return "", "", fmt.Errorf("%q is not a River queue's name: want river://CONNECTION/QUEUE", redact(name))
	}
	rest := name[len(QueuePrefix):]
	conn, queue, ok := strings.Cut(rest, "/")
	if q := strings.SplitN(queue, "?", 2)[0]; !ok || !config.ValidName(conn) || q == "" || strings.Contains(q, "/") {
		return "", "", fmt.Errorf("%q is not a River queue's name river://CONNECTION/QUEUE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a queue's name never says which server to dial", redact(name), config.NameRule)
	}
	return conn, queue, nil
}

// RefFor is queue (QUEUE, or QUEUE?states=…&sslmode=… for a capture) on
// the connection c, logged in with password when c's URL holds none.
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
	q, rawQuery, _ := strings.Cut(queue, "?")
	if ref.Queue, err = url.PathUnescape(q); err != nil || ref.Queue == "" || len(ref.Queue) >= 128 {
		return Ref{}, fmt.Errorf("the River queue %q: a River queue name is 1 to 127 characters", q)
	}
	// How to reach the server is the connection's alone; a queue's part
	// (what a letter or a request may carry) says only which states a
	// capture reads.
	settings, err := url.ParseQuery(u.RawQuery)
	if err != nil || settings.Has("states") {
		return Ref{}, fmt.Errorf("connection %q: its url's query is unreadable or names states, which are a capture's, not a connection's", c.Name)
	}
	own, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Ref{}, fmt.Errorf("the River queue %q: an unreadable query", q)
	}
	for k, v := range own {
		if k != "states" {
			return Ref{}, fmt.Errorf("the River queue %q: a queue's name takes states only, not %q: how to reach the server is the connection's", q, k)
		}
		settings[k] = v
	}
	if err := ref.setQuery(settings); err != nil {
		return Ref{}, fmt.Errorf("connection %q: %w", c.Name, err)
	}
	return ref, nil
}

// Server is where the Ref reaches, HOST:PORT/DATABASE, to tell whether a
// URL typed on the command line reaches a configured connection's server.
func (r Ref) Server() string {
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) + "/" + r.Database
}

// Login refuses a Ref that names no login: PostgreSQL would take the
// operating system's user, which on an operator's machine may be a
// superuser of the River database.
func (r Ref) Login() error {
	if r.User == "" {
		return fmt.Errorf("the River database %s: no login named, and expiryctl never logs in as the operating system's user: "+
			"name one in the connection's url (postgres://USER@HOST/DATABASE), or in --queue river://USER@HOST/DATABASE/QUEUE", r.DatabaseName())
	}
	return nil
}

func parseStates(v string) ([]string, error) {
	var states []string
	for s := range strings.SplitSeq(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != StateDiscarded && s != StateCancelled {
			return nil, fmt.Errorf("states may name discarded and cancelled, not %q: River keeps its other states' jobs alive", s)
		}
		if !slices.Contains(states, s) {
			states = append(states, s)
		}
	}
	slices.Sort(states)
	return states, nil
}

// Name is the queue's name as letters and the audit trail carry it:
// river://CONNECTION/QUEUE, with no server, no credentials and no
// settings.
func (r Ref) Name() string {
	return QueuePrefix + r.Conn + "/" + url.PathEscape(r.Queue)
}

// DatabaseName names the River database in messages: the connection's
// name and the server it reaches.
func (r Ref) DatabaseName() string {
	return fmt.Sprintf("%q (%s)", r.Conn, r.Server())
}

// String is Name: a Ref in a log or an error shows no password.
func (r Ref) String() string { return r.Name() }

// GoString is Name too, so that %#v shows no password either.
func (r Ref) GoString() string { return "riverjobs.Ref(" + r.Name() + ")" }

// PoolConfig is the pgx pool configuration that reaches the River
// database as the reference's login.
func (r Ref) PoolConfig() (*pgxpool.Config, error) {
	if err := r.Login(); err != nil {
		return nil, err
	}
	// The password is set after parsing: a parse error then cannot show it.
	dsn := []string{"host=" + dsnValue(r.Host), "port=" + strconv.Itoa(r.Port), "dbname=" + dsnValue(r.Database)}
	if r.User != "" {
		dsn = append(dsn, "user="+dsnValue(r.User))
	}
	for _, k := range connParams {
		if v, ok := r.params[k]; ok {
			dsn = append(dsn, k+"="+dsnValue(v))
		}
	}
	cfg, err := pgxpool.ParseConfig(strings.Join(dsn, " "))
	if err != nil {
		return nil, fmt.Errorf("the River database %s: %w", r.DatabaseName(), err)
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
