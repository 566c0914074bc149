package bullmq

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/config"
)

// System is the name of BullMQ's connections in the configuration file.
const System = "bullmq"

// ConfigRules are what a BullMQ connection takes in the configuration
// file: the redis:// (or rediss://, over TLS) URL of the Redis server and
// database, redis://[USER@]HOST:PORT/DB, with the password from
// password-env or password-file. Redis has no operating-system user to
// fall back on: a URL with no user logs in as Redis's default user.
var ConfigRules = config.Rules{System: System, Keys: []string{"url"}, Check: func(c config.Connection) error {
	if err := config.CheckURL(c, []string{"redis", "rediss"}, false); err != nil {
		return err
	}
	if len(c.URLs) != 1 {
		return fmt.Errorf("a BullMQ connection has one url, its Redis server's")
	}
	_, err := RefFor(c, "", DefaultPrefix+"/q")
	return err
}}

// PasswordEnv is the environment variable a Ref takes its Redis password
// from when the reference carries none, so that a password need not sit in
// shell history or a process list.
const PasswordEnv = "EXPIRYCTL_REDIS_PASSWORD"

// DefaultPrefix is BullMQ's own default key prefix.
const DefaultPrefix = "bull"

// Ref names one BullMQ queue on one Redis database, as a URL typed on the
// command line names it:
//
//	bullmq://[USER[:PASSWORD]@]HOST[:PORT][/DB]/QUEUE[?prefix=bull&tls=true]
//
// (PORT defaults to 6379, DB to 0, the prefix to BullMQ's "bull"), or as a
// connection of the configuration reaches it (RefFor). Letters name its
// queue bullmq://CONNECTION/PREFIX/QUEUE (Name), never by its server.
type Ref struct {
	// Conn is the connection's name, which letters record: the
	// configuration's, or one DeriveName made for a URL typed on the
	// command line.
	Conn string
	// Host and Port are the Redis server's.
	Host string
	Port int
	DB   int
	// Prefix and Queue make BullMQ's keys: PREFIX:QUEUE:failed, ….
	Prefix, Queue string
	// Username and Password log in (Redis 6 ACLs); Password comes from
	// PasswordEnv when the reference has none. Neither is ever in Name
	// or an error.
	Username, Password string
	// TLS connects over TLS (tls=true), verifying the server's
	// certificate against the system's roots.
	TLS bool
}

// IsRef says whether s names a BullMQ queue: it begins with bullmq://.
func IsRef(s string) bool {
	return len(s) >= len(QueuePrefix) && strings.EqualFold(s[:len(QueuePrefix)], QueuePrefix)
}

// ParseRef reads s, a BullMQ queue as a URL typed on the command line,
// or says what a BullMQ queue reference looks like. Its Conn is the name
// DeriveName gives the server.
func ParseRef(s string) (Ref, error) {
	const forms = "name a BullMQ queue as bullmq://HOST[:PORT][/DB]/QUEUE[?prefix=bull&tls=true], e.g. bullmq://127.0.0.1:6379/0/reservation-expiry (password from " + PasswordEnv + ")"
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("invalid BullMQ queue %q: %s", redact(s), forms)
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's error quotes the whole reference, password and all.
		return Ref{}, fmt.Errorf("invalid BullMQ queue %q: not a URL (a password with '/', '@' or '%%' must be percent-escaped); %s", redact(s), forms)
	}
	shown := u.Redacted()
	ref := Ref{Host: u.Hostname(), Port: 6379, Prefix: DefaultPrefix}
	if ref.Host == "" {
		return Ref{}, fmt.Errorf("invalid BullMQ queue %q: no Redis host; %s", shown, forms)
	}
	if p := u.Port(); p != "" {
		ref.Port, err = strconv.Atoi(p)
		if err != nil || ref.Port <= 0 || ref.Port > 65535 {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: port %q is not a TCP port; %s", shown, p, forms)
		}
	}
	if u.User != nil {
		ref.Username = u.User.Username()
		ref.Password, _ = u.User.Password()
	}
	if ref.Password == "" {
		ref.Password = os.Getenv(PasswordEnv)
	}
	q := u.Query()
	for k := range q {
		if k != "prefix" && k != "tls" {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: unknown parameter %q (prefix and tls are known); %s", shown, k, forms)
		}
	}
	if v := q.Get("tls"); v != "" {
		ref.TLS, err = strconv.ParseBool(v)
		if err != nil {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: tls=%q is neither true nor false", shown, v)
		}
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil || parts[i] == "" {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: an empty or badly escaped path segment; %s", shown, forms)
		}
	}
	db := ""
	switch len(parts) {
	case 1:
		ref.Queue = parts[0]
	case 2:
		db, ref.Queue = parts[0], parts[1]
	case 3:
		db, ref.Prefix, ref.Queue = parts[0], parts[1], parts[2]
		if p := q.Get("prefix"); p != "" && p != ref.Prefix {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: the path names prefix %q and the parameter %q", shown, ref.Prefix, p)
		}
	default:
		return Ref{}, fmt.Errorf("invalid BullMQ queue %q: %s", shown, forms)
	}
	if p := q.Get("prefix"); p != "" {
		ref.Prefix = p
	}
	if db != "" {
		ref.DB, err = strconv.Atoi(db)
		if err != nil || ref.DB < 0 {
			return Ref{}, fmt.Errorf("invalid BullMQ queue %q: database %q is not a number; %s", shown, db, forms)
		}
	}
	// BullMQ refuses a queue name with a colon: its keys would be
	// ambiguous.
	if strings.Contains(ref.Queue, ":") {
		return Ref{}, fmt.Errorf("invalid BullMQ queue %q: a BullMQ queue name has no ':'", shown)
	}
	ref.Conn = config.DeriveName(System, ref.Addr(), strconv.Itoa(ref.DB))
	return ref, nil
}

// SplitName reads a BullMQ queue's name as letters and requests carry it,
// bullmq://CONNECTION/PREFIX/QUEUE, into the connection's name and
// PREFIX/QUEUE. A name whose connection part is not a connection's name
// (a HOST:PORT, a login) is refused: a name never says which server to
// dial.
func SplitName(name string) (conn, queue string, err error) {
	if !IsRef(name) {
		return "", "", fmt.Errorf("%q is not a BullMQ queue's name: want bullmq://CONNECTION/PREFIX/QUEUE", redact(name))
	}
	conn, queue, ok := strings.Cut(name[len(QueuePrefix):], "/")
	prefix, q, two := strings.Cut(queue, "/")
	if !ok || !config.ValidName(conn) || !two || prefix == "" || q == "" || strings.Contains(q, "/") || strings.ContainsAny(queue, "?#") {
		return "", "", fmt.Errorf("%q is not a BullMQ queue's name bullmq://CONNECTION/PREFIX/QUEUE, whose CONNECTION is the name of a connection "+
			"of the configuration (%s): a queue's name never says which server to dial", redact(name), config.NameRule)
	}
	return conn, queue, nil
}

// RefFor is queue (PREFIX/QUEUE, as SplitName gives it, or QUEUE alone
// for BullMQ's default prefix) on the connection c, logged in with
// password when c's URL holds none.
func RefFor(c config.Connection, password, queue string) (Ref, error) {
	if len(c.URLs) == 0 {
		return Ref{}, fmt.Errorf("connection %q names no url", c.Name)
	}
	u, err := url.Parse(c.URLs[0])
	if err != nil {
		return Ref{}, fmt.Errorf("connection %q: its url is not a URL", c.Name)
	}
	ref := Ref{Conn: c.Name, Host: u.Hostname(), Port: 6379, Prefix: DefaultPrefix, TLS: strings.EqualFold(u.Scheme, "rediss")}
	if ref.Host == "" {
		return Ref{}, fmt.Errorf("connection %q: its url names no host", c.Name)
	}
	if p := u.Port(); p != "" {
		if ref.Port, err = strconv.Atoi(p); err != nil || ref.Port <= 0 || ref.Port > 65535 {
			return Ref{}, fmt.Errorf("connection %q: port %q is not a TCP port", c.Name, p)
		}
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if ref.DB, err = strconv.Atoi(db); err != nil || ref.DB < 0 {
			return Ref{}, fmt.Errorf("connection %q: its url's path %q is not a Redis database's number (redis://HOST:PORT/DB)", c.Name, u.Path)
		}
	}
	if u.RawQuery != "" {
		return Ref{}, fmt.Errorf("connection %q: a Redis url takes no settings (rediss:// connects over TLS)", c.Name)
	}
	if u.User != nil {
		ref.Username = u.User.Username()
		ref.Password, _ = u.User.Password()
	}
	if ref.Password == "" {
		ref.Password = password
	}
	parts := strings.Split(queue, "/")
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil || parts[i] == "" {
			return Ref{}, fmt.Errorf("BullMQ queue %q: an empty or badly escaped part", queue)
		}
	}
	switch len(parts) {
	case 1:
		ref.Queue = parts[0]
	case 2:
		ref.Prefix, ref.Queue = parts[0], parts[1]
	default:
		return Ref{}, fmt.Errorf("BullMQ queue %q: want QUEUE or PREFIX/QUEUE", queue)
	}
	if strings.Contains(ref.Queue, ":") {
		return Ref{}, fmt.Errorf("BullMQ queue %q: a BullMQ queue name has no ':'", queue)
	}
	return ref, nil
}

// Server is where the Ref reaches, HOST:PORT/DB, to tell whether a URL
// typed on the command line reaches a configured connection's server.
func (r Ref) Server() string { return r.Addr() + "/" + strconv.Itoa(r.DB) }

// Resolve finds the Ref, with the credentials to reach it, of a queue's
// name as letters carry it (bullmq://CONNECTION/PREFIX/QUEUE): through the
// operator's configuration, never by a server the name gives.
type Resolve func(name string) (Ref, error)

// redact is s as an error may show it: through url's redaction when s
// parses, and otherwise only its scheme, since what does not parse may
// hold a password anywhere.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		return scheme + "://…"
	}
	return "…"
}

// Addr is HOST:PORT.
func (r Ref) Addr() string { return net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) }

// Name is the queue's name as letters and the audit trail name it:
// bullmq://CONNECTION/PREFIX/QUEUE, with no server and no credentials
// (SplitName reads it back).
func (r Ref) Name() string {
	return QueuePrefix + r.Conn + "/" + url.PathEscape(r.Prefix) + "/" + url.PathEscape(r.Queue)
}

// String is Name: a Ref printed never shows its password.
func (r Ref) String() string { return r.Name() }

// GoString is Name too, for %#v.
func (r Ref) GoString() string { return r.Name() }

// Options are go-redis's options for the server and database.
func (r Ref) Options() *redis.Options {
	o := &redis.Options{Addr: r.Addr(), DB: r.DB, Username: r.Username, Password: r.Password,
		// expiryctl's connections are its own: BullMQ's getWorkers
		// counts clients by name, and an empty name is never a worker's.
		ClientName: "expiryctl",
		// Redis 7 protocol 3 changes the shape of some answers; 2 is what
		// every Redis BullMQ 5 supports speaks.
		Protocol: 2}
	if r.TLS {
		o.TLSConfig = &tls.Config{ServerName: r.Host, MinVersion: tls.VersionTLS12}
	}
	return o
}

// Dial is a client for the queue's Redis. The client reconnects by
// itself; the caller closes it.
func Dial(r Ref) *redis.Client { return redis.NewClient(r.Options()) }
