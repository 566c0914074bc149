package jobtable

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/expiryctl/expiryctl/config"
)

// PasswordEnv holds the password of the jobs table's login, so that it
// need not be in a --queue value.
const PasswordEnv = "EXPIRYCTL_JOBTABLE_PASSWORD"

// System is the name of jobs tables' connections in the configuration
// file.
const System = "jobtable"

// ConfigRules are what a jobs table's connection takes in the
// configuration file: the postgres:// URL of the table's database, naming
// the login (expiryctl never logs in as the operating system's user). The
// table is the queue's part of a name, jobtable://CONNECTION/SCHEMA.TABLE.
var ConfigRules = config.Rules{System: System, Keys: []string{"url"}, Check: func(c config.Connection) error {
	if err := config.CheckURL(c, []string{"postgres", "postgresql"}, true); err != nil {
		return err
	}
	if len(c.URLs) != 1 {
		return fmt.Errorf("a jobs table's connection has one url, the table's database")
	}
	_, err := RefFor(c, "", "public.jobs")
	return err
}}

// Ref is a jobs table on a connection: the connection string that
// reaches its database, and the table.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn string
	// ConnString reaches the table's database as the connection's login;
	// it may hold the password, and is never printed.
	ConnString string
	// Table is SCHEMA.TABLE, as a Mapping names it.
	Table  string
	server string
	user   string
}

// IsRef reports whether s names a jobs table.
func IsRef(s string) bool { return strings.HasPrefix(s, QueuePrefix) }

// ParseRef reads a jobs table as a URL typed on the command line,
// jobtable://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE/SCHEMA.TABLE[?sslmode=…];
// its errors never show the password. Its Conn is the name DeriveName
// gives the server.
func ParseRef(s string) (Ref, error) {
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("not a jobs table: want %sHOST[:PORT]/DATABASE/SCHEMA.TABLE", QueuePrefix)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Ref{}, errors.New("the jobs table's reference is not a URL: want jobtable://[USER@]HOST[:PORT]/DATABASE/SCHEMA.TABLE")
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if u.Host == "" || len(parts) != 2 || parts[0] == "" || !strings.Contains(parts[1], ".") {
		return Ref{}, fmt.Errorf("%s names no database and SCHEMA.TABLE: want jobtable://[USER@]HOST[:PORT]/DATABASE/SCHEMA.TABLE", redacted(u))
	}
	conn := url.URL{Scheme: "postgres", Host: u.Host, Path: "/" + parts[0], RawQuery: u.RawQuery}
	ref := Ref{Table: parts[1]}
	if u.User != nil {
		conn.User = u.User
		ref.user = u.User.Username()
		if _, has := u.User.Password(); !has && os.Getenv(PasswordEnv) != "" {
			conn.User = url.UserPassword(u.User.Username(), os.Getenv(PasswordEnv))
		}
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	ref.server = net.JoinHostPort(strings.ToLower(u.Hostname()), port) + "/" + url.PathEscape(parts[0])
	ref.Conn = config.DeriveName(System, net.JoinHostPort(strings.ToLower(u.Hostname()), port), url.PathEscape(parts[0]))
	ref.ConnString = conn.String()
	return ref, nil
}

// SplitName reads a jobs table's name as letters and requests carry it,
// jobtable://CONNECTION/SCHEMA.TABLE. A name whose connection part is not
// a connection's name (a HOST:PORT, a login) is refused: a name never
// says which server to dial.
func SplitName(name string) (conn, table string, err error) {
	shown := name
	if u, err := url.Parse(name); err == nil {
		shown = redacted(u)
	} else if scheme, _, ok := strings.Cut(name, "://"); ok {
		shown = scheme + "://…"
	}
	if !IsRef(name) {
		return "", "", fmt.Errorf("%q is not a jobs table's name: want jobtable://CONNECTION/SCHEMA.TABLE", shown)
	}
	conn, table, ok := strings.Cut(name[len(QueuePrefix):], "/")
	if !ok || !config.ValidName(conn) || !validTable(table) {
		return "", "", fmt.Errorf("%q is not a jobs table's name jobtable://CONNECTION/SCHEMA.TABLE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a table's name never says which server to dial", shown, config.NameRule)
	}
	return conn, table, nil
}

// validTable says whether s is SCHEMA.TABLE: two parts, neither empty,
// with nothing a URL would read otherwise.
func validTable(s string) bool {
	schema, table, ok := strings.Cut(s, ".")
	return ok && schema != "" && table != "" && !strings.Contains(table, ".") && !strings.ContainsAny(s, "/?#@")
}

// RefFor is table (SCHEMA.TABLE) on the connection c, logged in with
// password when c's URL holds none.
func RefFor(c config.Connection, password, table string) (Ref, error) {
	if len(c.URLs) == 0 {
		return Ref{}, fmt.Errorf("connection %q names no url", c.Name)
	}
	u, err := url.Parse(c.URLs[0])
	if err != nil || u.Host == "" {
		return Ref{}, fmt.Errorf("connection %q: its url is not a URL with a host", c.Name)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return Ref{}, fmt.Errorf("connection %q: its url names no database (postgres://USER@HOST:PORT/DATABASE)", c.Name)
	}
	if !validTable(table) {
		return Ref{}, fmt.Errorf("jobs table %q is not SCHEMA.TABLE", table)
	}
	ref := Ref{Conn: c.Name, Table: table}
	if u.User != nil {
		ref.user = u.User.Username()
		if _, has := u.User.Password(); !has && password != "" {
			u.User = url.UserPassword(u.User.Username(), password)
		}
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	ref.server = net.JoinHostPort(strings.ToLower(u.Hostname()), port) + "/" + url.PathEscape(db)
	ref.ConnString = u.String()
	return ref, nil
}

// Server is where the Ref reaches, HOST:PORT/DATABASE, to tell whether a
// URL typed on the command line reaches a configured connection's server.
func (r Ref) Server() string { return r.server }

// Login refuses a Ref that names no login: PostgreSQL would take the
// operating system's user, which on an operator's machine may be a
// superuser or the table's owner.
func (r Ref) Login() error {
	if r.user == "" {
		return fmt.Errorf("the jobs table %s: no login named, and expiryctl never logs in as the operating system's user: "+
			"name one in the connection's url (postgres://USER@HOST/DATABASE), or in --queue jobtable://USER@HOST/DATABASE/SCHEMA.TABLE", r.Name())
	}
	return nil
}

// MappingIn is the mapping the policy's job_tables keep for the table:
// under its name, jobtable://CONNECTION/SCHEMA.TABLE, or under the name
// of the server it was approved for before connections had names
// (jobtable://HOST:PORT/DATABASE/SCHEMA.TABLE), when that server's name
// derives to the Ref's connection, as migration 00041 named the servers
// of letters: two admins approved the mapping, and the server its key
// names is never dialled.
func (r Ref) MappingIn(tables map[string]json.RawMessage) (json.RawMessage, bool) {
	if raw, ok := tables[r.Name()]; ok {
		return raw, true
	}
	for key, raw := range tables {
		legacy, err := ParseRef(key)
		if err == nil && legacy.Conn == r.Conn && legacy.Table == r.Table {
			return raw, true
		}
	}
	return nil, false
}

// Name is how letters name the table: jobtable://CONNECTION/SCHEMA.TABLE,
// with no server, credentials or settings.
func (r Ref) Name() string { return QueuePrefix + r.Conn + "/" + r.Table }

// String is Name, so that a Ref printed by mistake shows no password.
func (r Ref) String() string { return r.Name() }

// GoString is the Ref for %#v, without the password its ConnString may
// hold.
func (r Ref) GoString() string { return "jobtable.Ref(" + r.Name() + ")" }

func redacted(u *url.URL) string {
	c := *u
	c.User, c.RawQuery = nil, ""
	return c.String()
}
