package pgjobs

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
)

// defaultPort is PostgreSQL's: a queue name always carries a port, so two
// spellings of one database are one queue.
const defaultPort = 5432

// connParams are the libpq settings a reference may carry besides its
// driver's own: those about how to reach the server safely, nothing that
// changes what a session sees.
var connParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// Endpoint is the PostgreSQL database a job store's reference reaches,
// and the login that reaches it, with the connection settings the
// reference gave. A driver's Ref embeds it. Printed, it shows the server
// alone, never the password.
type Endpoint struct {
	Host     string
	Port     int
	Database string
	// User is the login; an Endpoint with none reaches nothing
	// (PoolConfig refuses it, and a driver's Login says why).
	User string
	// Settings are the connection settings the reference gave
	// (sslmode, …).
	Settings Settings
	password string
}

// Settings are the libpq settings of a reference's query that say how to
// reach the server safely: sslmode, sslrootcert, sslcert, sslkey,
// connect_timeout and application_name.
type Settings map[string]string

// ParseURL reads a reference typed on the command line,
// SCHEME://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE/QUEUE[?QUERY], into the
// endpoint it reaches, its queue (everything after the database,
// unescaped) and its query, whose settings the driver takes (Set). The
// password may come from the environment variable passwordEnv instead;
// one in the URL wins. form says how to write a reference, for the errors
// about its shape. No error shows the input, password and all: the
// driver quotes it, Redacted.
func ParseURL(s, passwordEnv, form string) (Endpoint, string, url.Values, error) {
	// url.Parse's own errors quote the whole input, password and all.
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, "", nil, fmt.Errorf("not a URL; %s", form)
	}
	e := Endpoint{Host: strings.ToLower(u.Hostname()), Port: defaultPort, Settings: Settings{}}
	if e.Host == "" {
		return Endpoint{}, "", nil, fmt.Errorf("no host; %s", form)
	}
	if p := u.Port(); p != "" {
		if e.Port = tcpPort(p); e.Port == 0 {
			return Endpoint{}, "", nil, fmt.Errorf("port %q is not a TCP port", p)
		}
	}
	e.login(u.User, os.Getenv(passwordEnv))
	db, queue, ok := strings.Cut(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if ok {
		e.Database, err = url.PathUnescape(db)
		if err == nil {
			queue, err = url.PathUnescape(queue)
		}
	}
	if !ok || err != nil || e.Database == "" || queue == "" {
		return Endpoint{}, "", nil, fmt.Errorf("want /DATABASE/QUEUE after the host; %s", form)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Endpoint{}, "", nil, errors.New("unreadable query")
	}
	return e, queue, query, nil
}

// EndpointFor is the endpoint the configured connection c's URL reaches,
// postgres://USER@HOST:PORT/DATABASE, logged in with password when the
// URL holds none, and the URL's raw query, whose settings the driver
// reads. No error shows the URL.
func EndpointFor(c config.Connection, password string) (Endpoint, string, error) {
	if len(c.URLs) == 0 {
		return Endpoint{}, "", fmt.Errorf("connection %q names no url", c.Name)
	}
	u, err := url.Parse(c.URLs[0])
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("connection %q: its url is not a URL", c.Name)
	}
	e := Endpoint{Host: strings.ToLower(u.Hostname()), Port: defaultPort, Settings: Settings{}}
	if e.Host == "" {
		return Endpoint{}, "", fmt.Errorf("connection %q: its url names no host", c.Name)
	}
	if p := u.Port(); p != "" {
		if e.Port = tcpPort(p); e.Port == 0 {
			return Endpoint{}, "", fmt.Errorf("connection %q: port %q is not a TCP port", c.Name, p)
		}
	}
	e.login(u.User, password)
	if e.Database = strings.TrimPrefix(u.Path, "/"); e.Database == "" || strings.Contains(e.Database, "/") {
		return Endpoint{}, "", fmt.Errorf("connection %q: its url names no database (postgres://USER@HOST:PORT/DATABASE)", c.Name)
	}
	return e, u.RawQuery, nil
}

// tcpPort is p as a TCP port, 0 when it is none.
func tcpPort(p string) int {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0
	}
	return n
}

// login takes the URL's login, and password when the URL holds none.
func (e *Endpoint) login(user *url.Userinfo, password string) {
	if user != nil {
		e.User = user.Username()
		e.password, _ = user.Password()
	}
	if e.password == "" {
		e.password = password
	}
}

// Set takes one setting of a reference's query that is the connection's:
// sslmode, one of libpq's modes, or another of Settings. own lists the
// settings the driver takes itself, for the error about any other.
func (s *Settings) Set(key, value, own string) error {
	switch {
	case key == "sslmode" && !slices.Contains(sslModes, value):
		return fmt.Errorf("sslmode %q is none of %s", value, strings.Join(sslModes, ", "))
	case slices.Contains(connParams, key):
		if *s == nil {
			*s = Settings{}
		}
		(*s)[key] = value
		return nil
	default:
		return fmt.Errorf("unknown setting %q (known: %s, %s)", key, own, strings.Join(connParams, ", "))
	}
}

// HostPort is the server the endpoint reaches, HOST:PORT, as
// config.DeriveName names it.
func (e Endpoint) HostPort() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Server is where the endpoint reaches, HOST:PORT/DATABASE, to tell
// whether a URL typed on the command line reaches a configured
// connection's server.
func (e Endpoint) Server() string { return e.HostPort() + "/" + e.Database }

// String is Server: an Endpoint printed by mistake shows no password.
func (e Endpoint) String() string { return e.Server() }

// GoString is Server too, so that %#v shows no password either.
func (e Endpoint) GoString() string { return "pgjobs.Endpoint(" + e.Server() + ")" }

// PoolConfig is the pgx pool configuration that reaches the database as
// the endpoint's login. It refuses an endpoint that names no login:
// PostgreSQL would take the operating system's user, which on an
// operator's machine may be a superuser of the job store's database.
func (e Endpoint) PoolConfig() (*pgxpool.Config, error) {
	if e.User == "" {
		return nil, errors.New("no login named")
	}
	// The password is set after parsing: a parse error then cannot show it.
	dsn := []string{"host=" + dsnValue(e.Host), "port=" + strconv.Itoa(e.Port), "dbname=" + dsnValue(e.Database), "user=" + dsnValue(e.User)}
	for _, k := range connParams {
		if v, ok := e.Settings[k]; ok {
			dsn = append(dsn, k+"="+dsnValue(v))
		}
	}
	cfg, err := pgxpool.ParseConfig(strings.Join(dsn, " "))
	if err != nil {
		return nil, err
	}
	if e.password != "" {
		cfg.ConnConfig.Password = e.password
	}
	return cfg, nil
}

// dsnValue quotes v for a libpq keyword/value string.
func dsnValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Redact is s with whatever stands between the scheme and the host's @
// replaced, for error messages about a reference that may not even parse.
func Redact(s string) string {
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
