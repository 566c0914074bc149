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

	"github.com/expiryctl/expiryctl/deadletter"
)

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
// reaches it. Its Name carries no credentials; String is Name, so a Ref
// printed by mistake shows no password.
type Ref struct {
	Host     string
	Port     int
	Database string
	// Queue is River's queue name (river_job.queue).
	Queue string
	// User is the login; empty: PostgreSQL's usual default (PGUSER, then
	// the OS user).
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
	return len(s) >= len(deadletter.RiverQueuePrefix) && strings.EqualFold(s[:len(deadletter.RiverQueuePrefix)], deadletter.RiverQueuePrefix)
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
	ref.States = []string{StateDiscarded}
	for key, values := range query {
		v := values[len(values)-1]
		switch {
		case key == "states":
			states, err := parseStates(v)
			if err != nil {
				return Ref{}, fmt.Errorf("invalid River queue %q: %w", shown, err)
			}
			ref.States = states
		case key == "sslmode" && !slices.Contains(sslModes, v):
			return Ref{}, fmt.Errorf("invalid River queue %q: sslmode %q is none of %s", shown, v, strings.Join(sslModes, ", "))
		case slices.Contains(connParams, key):
			ref.params[key] = v
		default:
			return Ref{}, fmt.Errorf("invalid River queue %q: unknown setting %q (known: states, %s)", shown, key, strings.Join(connParams, ", "))
		}
	}
	return ref, nil
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
// river://HOST:PORT/DATABASE/QUEUE, with no credentials and no settings.
func (r Ref) Name() string {
	return r.DatabaseName() + "/" + url.PathEscape(r.Queue)
}

// DatabaseName is the River database's part of Name: river://HOST:PORT/DATABASE.
func (r Ref) DatabaseName() string {
	return deadletter.RiverQueuePrefix + net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) + "/" + url.PathEscape(r.Database)
}

// String is Name: a Ref in a log or an error shows no password.
func (r Ref) String() string { return r.Name() }

// GoString is Name too, so that %#v shows no password either.
func (r Ref) GoString() string { return "riverjobs.Ref(" + r.Name() + ")" }

// sameDatabase says whether o names a queue in r's database.
func (r Ref) sameDatabase(o Ref) bool {
	return r.Host == o.Host && r.Port == o.Port && r.Database == o.Database
}

// PoolConfig is the pgx pool configuration that reaches the River
// database as the reference's login.
func (r Ref) PoolConfig() (*pgxpool.Config, error) {
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
