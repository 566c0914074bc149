package riverjobs

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// System is the name of River's connections in the configuration file.
const System = "river"

// ConfigRules are what a River connection takes in the configuration
// file: the postgres:// URL of River's database, naming the login
// (expiryctl never logs in as the operating system's user), with
// sslmode and the other settings of pgjobs.Settings in its query.
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

// Ref names one River queue in one PostgreSQL database, and the login that
// reaches it (its Endpoint: Host, Port, Database, User and the connection
// settings). Its Name carries no credentials and no server, only the
// connection's name; String is Name, so a Ref printed by mistake shows no
// password.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn string
	pgjobs.Endpoint
	// Queue is River's queue name (river_job.queue).
	Queue string
	// States are the river_job states a source captures: discarded, and
	// cancelled when asked for.
	States []string
}

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
	shown := pgjobs.Redact(s)
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("invalid River queue %q: %s", shown, form)
	}
	e, queue, query, err := pgjobs.ParseURL(s, PasswordEnv, form)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid River queue %q: %w", shown, err)
	}
	ref := Ref{Endpoint: e, Queue: queue}
	// River's own limit (the queue_length constraint of river_job).
	if len(ref.Queue) >= 128 {
		return Ref{}, fmt.Errorf("invalid River queue %q: a River queue name is shorter than 128 characters", shown)
	}
	ref.Conn = config.DeriveName(System, ref.HostPort(), url.PathEscape(ref.Database))
	if err := ref.setQuery(query); err != nil {
		return Ref{}, fmt.Errorf("invalid River queue %q: %w", shown, err)
	}
	return ref, nil
}

// setQuery takes the states and connection settings of a reference's
// query.
func (r *Ref) setQuery(query url.Values) error {
	r.States = []string{StateDiscarded}
	for key, values := range query {
		v := values[len(values)-1]
		if key != "states" {
			if err := r.Settings.Set(key, v, "states"); err != nil {
				return err
			}
			continue
		}
		states, err := parseStates(v)
		if err != nil {
			return err
		}
		r.States = states
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
		return "", "", fmt.Errorf("%q is not a River queue's name: want river://CONNECTION/QUEUE", pgjobs.Redact(name))
	}
	rest := name[len(QueuePrefix):]
	conn, queue, ok := strings.Cut(rest, "/")
	if q := strings.SplitN(queue, "?", 2)[0]; !ok || !config.ValidName(conn) || q == "" || strings.Contains(q, "/") {
		return "", "", fmt.Errorf("%q is not a River queue's name river://CONNECTION/QUEUE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a queue's name never says which server to dial", pgjobs.Redact(name), config.NameRule)
	}
	return conn, queue, nil
}

// RefFor is queue (QUEUE, or QUEUE?states=…&sslmode=… for a capture) on
// the connection c, logged in with password when c's URL holds none.
func RefFor(c config.Connection, password, queue string) (Ref, error) {
	e, connQuery, err := pgjobs.EndpointFor(c, password)
	if err != nil {
		return Ref{}, err
	}
	ref := Ref{Conn: c.Name, Endpoint: e}
	q, rawQuery, _ := strings.Cut(queue, "?")
	if ref.Queue, err = url.PathUnescape(q); err != nil || ref.Queue == "" || len(ref.Queue) >= 128 {
		return Ref{}, fmt.Errorf("the River queue %q: a River queue name is 1 to 127 characters", q)
	}
	// How to reach the server is the connection's alone; a queue's part
	// (what a letter or a request may carry) says only which states a
	// capture reads.
	settings, err := url.ParseQuery(connQuery)
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
	cfg, err := r.Endpoint.PoolConfig()
	if err != nil {
		return nil, fmt.Errorf("the River database %s: %w", r.DatabaseName(), err)
	}
	return cfg, nil
}

// jobStore is the River database as package pgjobs reaches and names it.
func (r Ref) jobStore() pgjobs.Database {
	return pgjobs.Database{System: System, Title: "River", Name: r.DatabaseName(), Jobs: "river_job"}
}
